"""Clusters and their nodes: the inventory the scheduler places gangs on.

A Kubernetes cluster's kubeconfig is stored encrypted (Fernet, see :mod:`clusters.crypto`) in
``kubeconfig_encrypted`` and is only ever read back by the backend building its client: use
:meth:`Cluster.set_kubeconfig` / :meth:`Cluster.get_kubeconfig`, never the column.
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from core.choices import TextChoices
from quotas.models import Arch, ResourceFlavor

namespace_pattern_validator = RegexValidator(
    r"^[a-z0-9{}-]+$", "Lowercase letters, digits, dashes and the placeholders {project} / {organization}."
)


def default_tolerations() -> list[str]:
    return ["nvidia.com/gpu", "huawei.com/Ascend910"]


class Cluster(models.Model):
    class Backend(TextChoices):
        SIMULATED = "simulated", "Simulated"
        KUBERNETES = "kubernetes", "Kubernetes"

    name = models.CharField(max_length=63, unique=True)
    backend = models.CharField(max_length=20, choices=Backend.choices, default=Backend.SIMULATED)
    description = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True, help_text="Disabled clusters get no new jobs.")
    created_at = models.DateTimeField(auto_now_add=True)

    # Kubernetes connection (backend = kubernetes). The kubeconfig is write-only: encrypted at rest, never shown.
    kubeconfig_encrypted = models.TextField(blank=True, editable=False)
    in_cluster = models.BooleanField(
        default=False, help_text="Use the service account of the pod Tidal runs in instead of a kubeconfig.")
    namespace_pattern = models.CharField(
        max_length=63, default="tidal-{project}", validators=[namespace_pattern_validator],
        help_text="Namespace of a project's jobs; {project} and {organization} are replaced by slugs.")
    qps = models.FloatField(default=50.0, validators=[MinValueValidator(0.1)],
                            help_text="Kubernetes API requests per second (retries included).")
    burst = models.PositiveIntegerField(default=100, validators=[MinValueValidator(1)])
    image_pull_secret = models.CharField(max_length=253, blank=True,
                                         help_text="Must exist in every project namespace.")
    nccl_socket_ifname = models.CharField(max_length=100, default="eth0", help_text="NCCL_SOCKET_IFNAME.")
    nccl_extra_env = models.JSONField(default=dict, blank=True,
                                      help_text='Defaults a job may override, e.g. {"NCCL_IB_HCA": "mlx5"}.')
    rdma_resource = models.CharField(max_length=100, default="rdma/hca")
    gpu_tolerations = models.JSONField(default=default_tolerations, blank=True,
                                       help_text="Taint keys tolerated (any value, NoSchedule).")
    topology_block_key = models.CharField(max_length=100, default="tidal.dev/block")
    topology_rack_key = models.CharField(max_length=100, default="tidal.dev/rack")
    topology_switch_key = models.CharField(max_length=100, default="tidal.dev/switch")
    termination_grace_seconds = models.PositiveIntegerField(default=30, validators=[MaxValueValidator(3600)])
    pending_timeout_seconds = models.PositiveIntegerField(
        default=600, validators=[MinValueValidator(30), MaxValueValidator(7 * 86400)],
        help_text="An attempt with a replica Pending this long (unschedulable, image never pulled) fails and "
                  "retries. Keep it above the time your largest image takes to pull.")
    shm_size = models.CharField(max_length=20, default="16Gi", help_text="Default /dev/shm size of a replica.")
    cluster_domain = models.CharField(max_length=100, default="cluster.local")
    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_sync_error = models.CharField(max_length=1000, blank=True)
    last_sync_skipped = models.CharField(
        max_length=1000, blank=True, help_text="Nodes the last sync did not import, and why.")
    # Node sync: pods Tidal did not create that wait for devices (kube/pending.py), the demand of a pool whose
    # nodes they would run on: [{"pod": "ns/name", "resource": ..., "devices": n, "nodes": [...], "selector": bool}].
    pending_foreign = models.JSONField(default=list, blank=True, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_kubernetes(self) -> bool:
        return self.backend == self.Backend.KUBERNETES

    @property
    def has_kubeconfig(self) -> bool:
        return bool(self.kubeconfig_encrypted)

    def set_kubeconfig(self, text: str) -> None:
        """Encrypt and keep `text` (not saved yet); an empty text removes it."""
        from clusters.crypto import encrypt

        self.kubeconfig_encrypted = encrypt(text) if text else ""

    def get_kubeconfig(self) -> str:
        from clusters.crypto import decrypt

        return decrypt(self.kubeconfig_encrypted) if self.kubeconfig_encrypted else ""


# Admin-editable Kubernetes settings of a cluster (the kubeconfig itself is write-only and handled apart).
KUBERNETES_FIELDS = ["in_cluster", "qps", "burst", "namespace_pattern", "image_pull_secret", "nccl_socket_ifname",
                     "nccl_extra_env", "rdma_resource", "gpu_tolerations", "topology_block_key", "topology_rack_key",
                     "topology_switch_key", "termination_grace_seconds", "pending_timeout_seconds", "shm_size",
                     "cluster_domain"]


class FlavorRule(models.Model):
    """Maps a GPU product label (from GPU Feature Discovery) to a flavor: rules of the cluster first, then global
    rules (no cluster), each by position; first match wins. Glob, case-insensitive, e.g. `nvidia-h100*`."""

    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="flavor_rules",
                                help_text="Empty: applies to every cluster (after the cluster's own rules).")
    pattern = models.CharField(max_length=200, help_text="Glob on the product label or the device resource name.")
    flavor = models.ForeignKey(ResourceFlavor, on_delete=models.CASCADE, related_name="rules")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["cluster__name", "position", "id"]

    def __str__(self) -> str:
        return f"{self.cluster or 'global'}: {self.pattern} -> {self.flavor.name}"


class Node(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    hostname = models.CharField(max_length=253, blank=True,
                                help_text="kubernetes.io/hostname label when it differs from the name.")
    product = models.CharField(max_length=200, blank=True, help_text="GPU product label (Kubernetes nodes).")
    flavor = models.ForeignKey(ResourceFlavor, on_delete=models.PROTECT, related_name="nodes")
    devices = models.PositiveIntegerField(help_text="Allocatable devices of the flavor.")
    foreign_used = models.PositiveIntegerField(
        default=0, help_text="Devices taken by pods the scheduler does not place: pods the platform did not create, "
        "and pods of ended attempts still on the node. The scheduler never counts on them."
    )
    serving_used = models.PositiveIntegerField(
        default=0, help_text="Devices the replicas of Tidal's inference services hold (their pool counts them as "
        "its own demand, never as foreign pods). The scheduler never places training on them."
    )
    cpu_millis = models.PositiveIntegerField(default=0)
    memory_mib = models.PositiveIntegerField(default=0)
    arch = models.CharField(max_length=10, choices=Arch.choices, default=Arch.AMD64)
    block = models.CharField(max_length=63, blank=True)
    rack = models.CharField(max_length=63, blank=True)
    switch = models.CharField(max_length=63, blank=True)
    taints = models.JSONField(default=list, blank=True)
    cordoned = models.BooleanField(default=False)
    ready = models.BooleanField(default=True)
    not_ready_since = models.DateTimeField(
        null=True, blank=True, help_text="When the node's Ready condition went away (node sync). Attempts on it are "
        "lost once it has lasted TIDAL_NODE_LOST_GRACE; a node not ready without it (gone from the cluster, or "
        "marked by an admin) loses them at once.")
    position = models.PositiveIntegerField(
        default=0, validators=[MinValueValidator(0)], help_text="Order of the node in its cluster (ties in placement)."
    )
    # Quarantine (reliability): hardware-class failures took the node out of service until staff release it;
    # nothing new is placed there. Written only by reliability's services, never by node sync.
    quarantined_at = models.DateTimeField(null=True, blank=True)
    quarantine_reason = models.CharField(max_length=500, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster__name", "position", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="node_name_per_cluster")]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.cordoned and self.quarantined_at is None and self.cluster.enabled
