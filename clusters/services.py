"""Writes and cluster-wide operations: clusters, nodes and flavor rules (validated, audited, waking the scheduler
on commit, whatever the door), the connection test, node sync, observation, orphan sweep.

Celery tasks and the admin console call these; each loop over clusters isolates failures per cluster, so one
unreachable cluster never stops the others.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import yaml
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from clusters import kubemap, selectors
from clusters.backends import backend_for_cluster
from clusters.kube.dispatch import attempt_key, sweep_orphans
from clusters.kube.errors import ApiError, RenderError
from clusters.kube.nodes import NodeRow, inventory, platform_attempts
from clusters.models import KUBERNETES_FIELDS, Cluster, FlavorRule, Node
from core import wakeup
from core.errors import DomainError
from jobs import selectors as job_selectors
from jobs.models import Attempt
from jobs.observations import record_all
from jobs.selectors import open_attempts
from jobs.services import record_event
from quotas.models import Arch, ResourceFlavor
from tenancy.audit import delete_audited, save_audited

logger = logging.getLogger(__name__)
MAX_SKIPPED_SHOWN = 10  # nodes named in a sync report; the rest are counted


# ------------------------------------------------------------------------------------------------ credentials

def check_kubeconfig(text: str) -> None:
    """Raise DomainError unless `text` looks like a kubeconfig (a YAML mapping with clusters and users)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DomainError(f"The kubeconfig is not valid YAML: {exc}", field="kubeconfig") from None
    if not isinstance(data, dict) or not data.get("clusters") or not data.get("users"):
        raise DomainError("The kubeconfig needs `clusters`, `users` and a context.", field="kubeconfig")


CLUSTER_FIELDS = ("name", "backend", "description", "enabled", *KUBERNETES_FIELDS, "kubeconfig_encrypted")
NODE_FIELDS = ("name", "hostname", "flavor", "devices", "foreign_used", "cpu_millis", "memory_mib", "arch", "block",
               "rack", "switch", "taints", "cordoned", "ready", "position")
RULE_FIELDS = ("cluster", "pattern", "flavor", "position")


def _apply(obj: Any, values: Mapping[str, Any] | None) -> None:
    for name, value in (values or {}).items():
        setattr(obj, name, value)


@transaction.atomic
def cluster_save(*, actor: Any, cluster: Cluster, values: Mapping[str, Any] | None = None,
                 kubeconfig: str | None = None) -> Cluster:
    """Create or change a cluster. `kubeconfig`: None keeps the stored one, "" removes it, a text replaces it
    (encrypted at rest; the audit log says it changed, never what it holds)."""
    _apply(cluster, values)
    if kubeconfig is not None:
        if kubeconfig:
            check_kubeconfig(kubeconfig)
        cluster.set_kubeconfig(kubeconfig)
    save_audited(actor=actor, obj=cluster, fields=CLUSTER_FIELDS, hidden={"kubeconfig_encrypted": "kubeconfig"})
    transaction.on_commit(wakeup.wake_scheduler)
    return cluster


@transaction.atomic
def cluster_delete(*, actor: Any, cluster: Cluster) -> None:
    """Delete a cluster and its nodes; the attempts that ran there keep their placement, without the cluster."""
    delete_audited(actor=actor, obj=cluster, fields=("name", "backend"))
    transaction.on_commit(wakeup.wake_scheduler)


@transaction.atomic
def node_save(*, actor: Any, node: Node, values: Mapping[str, Any] | None = None) -> Node:
    """Create or change a node (by hand: a simulated cluster's inventory, or a cordon). Node sync writes the nodes
    of Kubernetes clusters itself (`nodes_upsert`). A node an admin marks not ready loses its attempts at once."""
    _apply(node, values)
    if node.ready:
        node.not_ready_since = None
    save_audited(actor=actor, obj=node, fields=NODE_FIELDS)
    transaction.on_commit(wakeup.wake_scheduler)
    return node


@transaction.atomic
def node_delete(*, actor: Any, node: Node) -> None:
    delete_audited(actor=actor, obj=node, fields=("name", "flavor", "devices"))
    transaction.on_commit(wakeup.wake_scheduler)


@transaction.atomic
def flavor_rule_save(*, actor: Any, rule: FlavorRule, values: Mapping[str, Any] | None = None) -> FlavorRule:
    """Create or change a rule mapping GPU products to a flavor (used by the next node sync)."""
    _apply(rule, values)
    save_audited(actor=actor, obj=rule, fields=RULE_FIELDS)
    return rule


@transaction.atomic
def flavor_rule_delete(*, actor: Any, rule: FlavorRule) -> None:
    delete_audited(actor=actor, obj=rule, fields=RULE_FIELDS)


@dataclass
class ConnectionReport:
    ok: bool
    version: str = ""
    namespace: str = ""
    missing: list[str] = field(default_factory=list)
    error: str = ""

    def summary(self) -> str:
        if self.error:
            return f"cannot connect: {self.error}"
        text = f"Kubernetes {self.version}"
        if self.missing:
            return f"{text}; missing permissions: {', '.join(self.missing)}"
        return f"{text}; every permission Tidal needs is granted in {self.namespace}"


def cluster_test_connection(cluster: Cluster, *, client=None) -> ConnectionReport:
    """Server version and the permissions Tidal lacks (checked in the first project's namespace)."""
    from clusters.backends.kubernetes import build_client

    project = selectors.first_project()
    namespace = kubemap.namespace_for(cluster, project.slug if project else "default",
                                      project.organization.slug if project else "")
    try:
        client = client or build_client(cluster)
        info = client.server_version()
        missing = client.missing_permissions(namespace)
    except (ApiError, DomainError) as exc:
        return ConnectionReport(False, namespace=namespace, error=str(exc))
    except Exception as exc:  # a kubeconfig the client library rejects, an unreachable in-cluster API
        return ConnectionReport(False, namespace=namespace, error=f"{type(exc).__name__}: {exc}")
    version = str(info.get("gitVersion") or f"{info.get('major', '?')}.{info.get('minor', '?')}")
    return ConnectionReport(not missing, version=version, namespace=namespace, missing=missing)


def hold_nodes_of(attempt: Attempt, why: str) -> None:
    """Count an ended attempt's devices as taken on its nodes (`Node.foreign_used`), as node sync counts the pods of
    ended attempts it finds on a node: its stop failed, so its pods may run on, and nothing must be placed there
    meanwhile. The next node sync sets what the pods it lists take (nothing once they are gone)."""
    per_node: Counter[str] = Counter()
    for row in attempt.placement:
        per_node[str(row["node"])] += int(row["devices"])
    for node, devices in per_node.items():
        Node.objects.filter(cluster=attempt.cluster, name=node).update(foreign_used=F("foreign_used") + devices)
    record_event(attempt.job, kind="note", actor="backend", attempt=attempt.number, reason=(
        f"stop of attempt {attempt.number} failed ({why}); its devices on {', '.join(sorted(per_node))} stay "
        "taken until its pods are gone"))


# -------------------------------------------------------------------------------------------------- node sync

@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # in the database, not in the cluster: marked not ready
    unmatched: dict[str, str] = field(default_factory=dict)  # not imported: node name -> why

    def skipped(self) -> str:
        """The nodes not imported and why, e.g. "gpu-9 (Tesla-T4: no flavor rule matches)"; empty when none."""
        shown = [f"{name} ({why})" for name, why in sorted(self.unmatched.items())[:MAX_SKIPPED_SHOWN]]
        more = len(self.unmatched) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")

    def summary(self) -> str:
        text = f"{len(self.created)} new, {len(self.updated)} updated, {len(self.gone)} gone (marked not ready)"
        if self.unmatched:
            text += f", {len(self.unmatched)} not imported: {self.skipped()}"
        return text


def _node_flavor(row: NodeRow, node: Node | None, flavors: Mapping[str, ResourceFlavor],
                 cpu_flavors: Mapping[str, ResourceFlavor]) -> tuple[ResourceFlavor | None, str]:
    """The flavor of a synced node, or None and why it is not imported.

    A rule's flavor wins (a node may gain or change accelerators). A known node no rule matches keeps its flavor:
    a GPU node whose device plugin restarts briefly shows no GPUs and must not turn into a CPU node. Only a new
    node without any accelerator (no product label, no device resource) becomes the CPU flavor of its arch.
    """
    flavor = flavors.get(row.flavor) if row.flavor else None
    if flavor is not None or node is not None:
        return flavor or node.flavor, ""
    if row.product:
        return None, f"{row.product}: no flavor rule matches"
    arch = row.arch or Arch.AMD64
    cpu = cpu_flavors.get(arch)
    if cpu is None:
        return None, f"no accelerator, and no CPU flavor (device resource empty or cpu) for {arch}"
    return cpu, ""


def _not_ready_since(row: NodeRow, node: Node | None, now: datetime) -> datetime | None:
    """When a node that is not Ready stopped being Ready: the API's time (so a node that came back and went again
    between two syncs starts its grace again), else when a sync first saw it so; never later than now."""
    if row.ready:
        return None
    seen_before = node.not_ready_since if node is not None and not node.ready else None
    return min(row.not_ready_since or seen_before or now, now)


def nodes_upsert(cluster: Cluster, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
                 ) -> SyncReport:
    """Node rows from the cluster's node and pod dicts. Nodes that left the cluster are marked not ready and kept
    (running jobs and history refer to them), without a NotReady time: their attempts are lost at once, where a
    node still there but NotReady loses them only once that has lasted TIDAL_NODE_LOST_GRACE. Nodes no flavor rule
    matches are reported, not imported."""
    pods = list(pods)
    rules = selectors.flavor_rules_for(cluster)
    flavors = {f.name: f for f in selectors.flavors()}
    cpu_flavors: dict[str, ResourceFlavor] = {}
    for flavor in sorted(flavors.values(), key=lambda f: f.name):
        if flavor.is_cpu:
            cpu_flavors.setdefault(flavor.arch, flavor)  # several for one arch: the first by name
    # CPU flavors name no device resource: counting `cpu` as one would give every node a "product".
    accelerators = sorted({f.device_resource for f in flavors.values() if not f.is_cpu})
    # Pods of attempts that ended but are still there (their stop failed, or they are terminating) take their
    # devices as foreign pods do, until they are gone.
    ended = {attempt_key(a.job_id, a.number) for a in selectors.ended_attempts(
        cluster, platform_attempts(pods, kubemap.instance()))}
    rows = inventory(nodes, pods, kubemap.inventory_settings(cluster, rules, accelerators), ended)
    report = SyncReport()
    now = timezone.now()
    with transaction.atomic():
        existing = {n.name: n for n in Node.objects.select_for_update().filter(cluster=cluster)}
        position = max((n.position for n in existing.values()), default=0)
        seen = set()
        for row in rows:
            seen.add(row.name)
            node = existing.get(row.name)
            flavor, why = _node_flavor(row, node, flavors, cpu_flavors)
            if flavor is None:
                report.unmatched[row.name] = why
                continue
            # A CPU flavor's resource is not among the inventory's device keys: its nodes get 0 devices.
            fields = {**kubemap.node_fields(row, flavor.device_resource),
                      "not_ready_since": _not_ready_since(row, node, now)}
            if node is None:
                position += 1
                Node.objects.create(cluster=cluster, name=row.name, flavor=flavor, position=position, **fields)
                report.created.append(row.name)
                continue
            changed = {k: v for k, v in {**fields, "flavor": flavor}.items() if getattr(node, k) != v}
            if changed:
                for k, v in changed.items():
                    setattr(node, k, v)
                node.save(update_fields=[*changed, "updated_at"])
                report.updated.append(row.name)
        for name, node in existing.items():
            if name not in seen and (node.ready or node.not_ready_since is not None):
                node.ready, node.not_ready_since = False, None
                node.save(update_fields=["ready", "not_ready_since", "updated_at"])
                report.gone.append(name)
        Cluster.objects.filter(pk=cluster.pk).update(last_sync_at=timezone.now(), last_sync_error="",
                                                     last_sync_skipped=report.skipped()[:1000])
    if report.created or report.gone or report.updated:
        transaction.on_commit(wakeup.wake_scheduler)
    return report


def cluster_sync_nodes(cluster: Cluster, *, client=None) -> SyncReport:
    from clusters.backends.kubernetes import client_for

    try:
        client = client or client_for(cluster)
        nodes = client.list_nodes()
        pods, _ = client.list("Pod")  # every namespace: devices of foreign pods are subtracted
    except ApiError as exc:
        Cluster.objects.filter(pk=cluster.pk).update(last_sync_error=str(exc)[:1000])
        raise
    return nodes_upsert(cluster, nodes, pods)


# ---------------------------------------------------------------------------------------- loops over clusters

def _each_kubernetes_cluster(what: str, action) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for cluster in selectors.kubernetes_clusters():
        try:
            results[cluster.name] = action(cluster)
        except Exception as exc:  # one broken cluster must not stop the others
            logger.exception("%s of cluster %s failed", what, cluster.name)
            results[cluster.name] = exc
    return results


def observe_cluster(cluster: Cluster) -> list[str]:
    """Record what the cluster's backend observes of every open attempt on it (the full resync); the new job
    states. An observation hinting that the node inventory is stale (a replica stuck Pending) syncs it again, so
    the retry is placed on what is really free."""
    backend = backend_for_cluster(cluster)
    attempts = list(open_attempts().filter(cluster=cluster))
    states = record_all(attempts, backend.observe(attempts))
    if getattr(backend, "nodes_stale", False):
        try:
            cluster_sync_nodes(cluster)
        except ApiError as exc:
            logger.warning("node sync of %s after a stuck attempt failed: %s", cluster.name, exc)
    return states


def observe_simulated() -> None:
    for cluster in selectors.simulated_clusters():
        observe_cluster(cluster)


def kube_resync_all() -> dict[str, Any]:
    return _each_kubernetes_cluster("resync", observe_cluster)


def kube_sync_nodes_all(cluster_id: int | None = None) -> dict[str, Any]:
    if cluster_id is not None:
        cluster = selectors.clusters().filter(pk=cluster_id).first()
        return {cluster.name: cluster_sync_nodes(cluster)} if cluster else {}
    return _each_kubernetes_cluster("node sync", cluster_sync_nodes)


def active_attempts() -> set[tuple[str, int]]:
    """(job, attempt) keys whose objects must stay: open attempts, and the next attempt of queued jobs (one
    admitted and dispatched between the sweep's read and its list would otherwise look orphaned)."""
    return {attempt_key(job_id, attempt) for job_id, attempt in job_selectors.live_attempt_numbers()}


def cluster_namespaces(cluster: Cluster) -> list[str]:
    """The namespaces on `cluster` that can hold Tidal's objects: those of every project that has had a job."""
    namespaces = set()
    for project in selectors.projects_with_jobs():
        try:
            namespaces.add(kubemap.namespace_for(cluster, project.slug, project.organization.slug))
        except RenderError:  # an invalid namespace pattern: nothing could have been dispatched there either
            continue
    return sorted(namespaces)


def cluster_sweep_orphans(cluster: Cluster, *, client=None) -> list[str]:
    """Delete the cluster's platform objects of no active attempt, namespace by namespace: Tidal may list services,
    config maps and secrets only in project namespaces (docs/kubernetes.md, RBAC). A namespace that refuses (no
    RoleBinding there) is skipped with a warning naming it; the others are still swept."""
    from clusters.backends.kubernetes import client_for

    client = client or client_for(cluster)
    result = sweep_orphans(client, active_attempts(), namespaces=cluster_namespaces(cluster),
                           instance=kubemap.instance(), grace_seconds=cluster.termination_grace_seconds)
    if result.deleted:
        logger.info("orphan sweep on %s deleted %d objects: %s", cluster.name, len(result.deleted),
                    ", ".join(result.deleted[:20]))
    for namespace, why in result.skipped.items():
        logger.warning("orphan sweep on %s skipped namespace %s: %s", cluster.name, namespace, why)
    return result.deleted


def kube_sweep_all() -> dict[str, Any]:
    return _each_kubernetes_cluster("orphan sweep", cluster_sweep_orphans)
