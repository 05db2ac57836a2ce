"""Tidal-run inference services: replicas of one image in a pool, scaled by Tidal with the HPA's rules on a demand
metric (autoscale.py). Their devices are the pool's serving demand (never lent to training)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from core.choices import TextChoices
from pools.models import validate_slug

MAX_REPLICAS = 1000


class Service(models.Model):
    class Metric(TextChoices):
        REQUESTS_PER_SECOND = "requests_per_second", "requests/s (the service's total)"
        GPU_DUTY_CYCLE = "gpu_duty_cycle", "GPU duty cycle (percent, the replicas' mean)"

    class Source(TextChoices):
        PUSH = "push", "pushed to the API"
        PROMETHEUS = "prometheus", "read from Prometheus"

    class State(TextChoices):
        PENDING = "pending", "no replica ready"
        SCALING = "scaling", "some replicas not ready"
        RUNNING = "running", "every replica ready"

    project = models.ForeignKey("tenancy.Project", on_delete=models.CASCADE, related_name="services")
    pool = models.ForeignKey("pools.Pool", on_delete=models.PROTECT, related_name="services")
    name = models.CharField(max_length=63, validators=[validate_slug])
    image = models.CharField(max_length=500)
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    port = models.PositiveIntegerField(default=8000, validators=[MinValueValidator(1), MaxValueValidator(65535)])
    devices_per_replica = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    min_replicas = models.PositiveIntegerField(default=1, validators=[MaxValueValidator(MAX_REPLICAS)])
    max_replicas = models.PositiveIntegerField(validators=[MinValueValidator(1), MaxValueValidator(MAX_REPLICAS)])
    metric = models.CharField(max_length=32, choices=Metric.choices, default=Metric.REQUESTS_PER_SECOND)
    target_per_replica = models.FloatField(help_text="The metric one replica should carry.")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.PUSH)
    query = models.CharField(max_length=2000, blank=True, help_text="PromQL giving the metric (source prometheus).")
    latency_slo_ms = models.PositiveIntegerField(null=True, blank=True, help_text="p99 latency target.")
    replicas = models.PositiveIntegerField(default=0, help_text="Desired now (the autoscaler's).")
    ready_replicas = models.PositiveIntegerField(default=0)
    scale_reason = models.CharField(max_length=500, blank=True,
                                    help_text="The autoscaler's last word: why the replicas are what they are.")
    metric_value = models.FloatField(null=True, blank=True, help_text="The metric's last reading.")
    metric_at = models.DateTimeField(null=True, blank=True)
    p99_latency_ms = models.FloatField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project_id", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="service_name_per_project")]

    def __str__(self) -> str:
        return f"{self.project_id}/{self.name}"

    @property
    def state(self) -> str:
        """Derived from the replicas: none ready (of some wanted), some, or all."""
        if self.ready_replicas == 0 and self.replicas > 0:
            return self.State.PENDING
        return self.State.RUNNING if self.ready_replicas >= self.replicas else self.State.SCALING

    @property
    def devices(self) -> int:
        """What the service demands of its pool: its desired replicas' devices."""
        return int(self.replicas) * int(self.devices_per_replica)


class ServiceSample(models.Model):
    """The service at one autoscaler tick: the metric, the recommendation (the 300 s window reads these), desired
    and ready replicas (the service page's charts)."""

    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    value = models.FloatField(null=True, blank=True)
    recommendation = models.PositiveIntegerField(null=True, blank=True)
    replicas = models.PositiveIntegerField()
    ready = models.PositiveIntegerField()

    class Meta:
        ordering = ["service", "at"]
        indexes = [models.Index(fields=["service", "at"])]

    def __str__(self) -> str:
        return f"{self.service_id} at {self.at:%Y-%m-%d %H:%M:%S}: {self.ready}/{self.replicas}"


class ScaleEvent(models.Model):
    """A change of the desired replicas, with the autoscaler's reason (or the user's change)."""

    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="scale_events")
    at = models.DateTimeField(db_index=True)
    before = models.PositiveIntegerField()
    after = models.PositiveIntegerField()
    reason = models.CharField(max_length=500)
    # False for the service's creation: HPA's doubling limit counts only what the autoscaler added.
    autoscaled = models.BooleanField(default=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.service_id}: {self.before} -> {self.after} ({self.reason})"
