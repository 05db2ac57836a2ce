"""Resource flavors, priority classes and per-project quotas: what the scheduler holds every project to."""

from __future__ import annotations

from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from core.choices import TextChoices
from tenancy.models import Project

flavor_name_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$", "Use lowercase letters, digits, dots and dashes (e.g. nvidia-h100-80gb)."
)


CPU_DEVICE_RESOURCES = frozenset({"", "cpu"})


class Arch(TextChoices):
    AMD64 = "amd64", "amd64"
    ARM64 = "arm64", "arm64"


class ResourceFlavor(models.Model):
    """An accelerator kind a node offers and a job asks for."""

    name = models.CharField(max_length=63, unique=True, validators=[flavor_name_validator])
    vendor = models.CharField(max_length=40, help_text="nvidia, huawei, amd, none (CPU only)...")
    device_resource = models.CharField(
        max_length=100, help_text="The Kubernetes extended resource, e.g. nvidia.com/gpu or huawei.com/Ascend910."
    )
    arch = models.CharField(max_length=10, choices=Arch.choices, default=Arch.AMD64)
    rdma = models.BooleanField(default=False, help_text="Nodes of this flavor have RDMA (InfiniBand/RoCE).")
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_cpu(self) -> bool:
        """A CPU-only flavor: no accelerator resource to request (device resource empty, or `cpu` since the admin
        form wants a value). Node sync gives it the nodes without accelerators, with 0 devices: its jobs ask 0
        devices per replica, and Kubernetes enforces their CPU and memory requests."""
        return self.device_resource.strip().lower() in CPU_DEVICE_RESOURCES


class PriorityClass(models.Model):
    """Larger values run first. Preemptible classes run only on idle capacity and are the first to be preempted."""

    name = models.CharField(max_length=40, unique=True, validators=[flavor_name_validator])
    value = models.IntegerField(unique=True)
    preemptible = models.BooleanField(default=False)
    is_default = models.BooleanField(default=False)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-value"]
        verbose_name_plural = "priority classes"
        constraints = [models.UniqueConstraint(fields=["is_default"], condition=Q(is_default=True),
                                               name="one_default_priority_class")]

    def __str__(self) -> str:
        return self.name


class Quota(models.Model):
    """A project's share of one flavor inside its organization (the cohort that lends and borrows)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="quotas")
    flavor = models.ForeignKey(ResourceFlavor, on_delete=models.PROTECT, related_name="quotas")
    guaranteed = models.PositiveIntegerField(default=0, help_text="Devices always available to the project.")
    borrow_limit = models.PositiveIntegerField(
        default=0, help_text="Devices the project may use above its guarantee from idle capacity of its organization."
    )
    lend_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Devices of its idle guarantee others may borrow; empty means all of it."
    )

    class Meta:
        ordering = ["project__slug", "flavor__name"]
        constraints = [models.UniqueConstraint(fields=["project", "flavor"], name="one_quota_per_project_flavor")]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.flavor.name}: {self.guaranteed}+{self.borrow_limit}"


class ProjectUsage(models.Model):
    """Decayed past device-seconds per project: fair share orders a project that used less ahead of a heavy one."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="usage")
    decayed_device_seconds = models.FloatField(default=0.0, validators=[MinValueValidator(0.0)])
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.project.slug}: {self.decayed_device_seconds:.0f} device-s"
