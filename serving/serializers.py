from __future__ import annotations

import math
from typing import Any

from rest_framework import serializers

from core.serializers import FreeFormJSON, StrictSerializer, WholeNumberField
from serving.models import MAX_REPLICAS, Service
from tenancy.models import is_slug
from tenancy.serializers import ScopedProjectField

MAX_METRIC = 1e12


def finite(value: float) -> float:
    if not math.isfinite(value):
        raise serializers.ValidationError("A finite number.")
    return value


def slug(value: str) -> str:
    if not is_slug(value):
        raise serializers.ValidationError("Lowercase letters, digits and hyphens, starting with a letter.")
    return value


def only_service(value: str) -> str:
    if value != "service":
        raise serializers.ValidationError('"service": other launchers are jobs (POST /api/v1/jobs/).')
    return value


class ReplicasSerializer(StrictSerializer):
    min = WholeNumberField(min_value=0, max_value=MAX_REPLICAS, default=1)
    max = WholeNumberField(min_value=1, max_value=MAX_REPLICAS)


class ReplicasChangeSerializer(StrictSerializer):
    min = WholeNumberField(min_value=0, max_value=MAX_REPLICAS, required=False)
    max = WholeNumberField(min_value=1, max_value=MAX_REPLICAS, required=False)


class ServiceCreateSerializer(StrictSerializer):
    """A service as `tidal submit` sends it (a YAML file with `launcher: service`) or as JSON."""

    project = ScopedProjectField()
    launcher = serializers.CharField(required=False, validators=[only_service],
                                     help_text="`service` (optional here; what `tidal submit` reads).")
    name = serializers.CharField(max_length=63, validators=[slug])
    pool = serializers.CharField(max_length=63, help_text="The pool the replicas run in (its nodes only).")
    image = serializers.CharField(max_length=500)
    command = serializers.ListField(child=serializers.CharField(max_length=4000), max_length=100, default=list)
    args = serializers.ListField(child=serializers.CharField(max_length=4000), max_length=100, default=list)
    env = serializers.DictField(child=serializers.CharField(max_length=4000, allow_blank=True), default=dict,
                                validators=[FreeFormJSON()])
    port = WholeNumberField(min_value=1, max_value=65535, default=8000)
    devices_per_replica = WholeNumberField(min_value=1, max_value=1024)
    replicas = ReplicasSerializer(help_text="{min, max}: the autoscaler keeps the replicas within them.")
    metric = serializers.ChoiceField(choices=Service.Metric.choices, default=Service.Metric.REQUESTS_PER_SECOND)
    target_per_replica = serializers.FloatField(validators=[finite], help_text="The metric one replica carries.")
    source = serializers.ChoiceField(choices=Service.Source.choices, default=Service.Source.PUSH)
    query = serializers.CharField(max_length=2000, allow_blank=True, default="")
    latency_slo_ms = WholeNumberField(min_value=1, max_value=3_600_000, allow_null=True, required=False)

    def to_model_values(self) -> tuple[Any, dict[str, Any]]:
        """(project, the Service fields) of the validated body."""
        values = dict(self.validated_data)
        values.pop("launcher", None)
        project = values.pop("project")
        replicas = values.pop("replicas")
        return project, {**values, "min_replicas": replicas["min"], "max_replicas": replicas["max"]}


class ServiceChangeSerializer(StrictSerializer):
    replicas = ReplicasChangeSerializer(required=False)
    target_per_replica = serializers.FloatField(validators=[finite], required=False)
    latency_slo_ms = WholeNumberField(min_value=1, max_value=3_600_000, allow_null=True, required=False)
    query = serializers.CharField(max_length=2000, allow_blank=True, required=False)

    def to_model_values(self) -> dict[str, Any]:
        values = dict(self.validated_data)
        replicas = values.pop("replicas", {})
        values.update({f"{k}_replicas": v for k, v in replicas.items()})
        return values


class ScaleEventSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    before = serializers.IntegerField()
    after = serializers.IntegerField()
    reason = serializers.CharField()


class ServiceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.CharField(source="project.slug")
    name = serializers.CharField()
    pool = serializers.CharField(source="pool.name")
    cluster = serializers.CharField(source="pool.cluster.name")
    flavor = serializers.CharField(source="pool.flavor.name")
    image = serializers.CharField()
    command = serializers.ListField()
    args = serializers.ListField()
    env = serializers.DictField()
    port = serializers.IntegerField()
    devices_per_replica = serializers.IntegerField()
    replicas = serializers.SerializerMethodField(help_text="{min, max, desired, ready}")
    devices = serializers.IntegerField(help_text="Its desired replicas' devices: the pool's demand from it.")
    metric = serializers.CharField()
    target_per_replica = serializers.FloatField()
    source = serializers.CharField()
    query = serializers.CharField()
    latency_slo_ms = serializers.IntegerField(allow_null=True)
    state = serializers.CharField()
    scale_reason = serializers.CharField(help_text="The autoscaler's last word (e.g. why it kept the replicas).")
    metric_value = serializers.FloatField(allow_null=True, help_text="The metric's last reading.")
    metric_at = serializers.DateTimeField(allow_null=True)
    p99_latency_ms = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()
    scale_events = serializers.SerializerMethodField(help_text="Detail only: the last 20 changes with reasons.")

    def get_replicas(self, service: Service) -> dict[str, int]:
        return {"min": service.min_replicas, "max": service.max_replicas, "desired": service.replicas,
                "ready": service.ready_replicas}

    def get_scale_events(self, service: Service) -> list[dict[str, Any]]:
        if not self.context.get("detail"):
            return []
        return list(ScaleEventSerializer(service.scale_events.all()[:20], many=True).data)


class MetricSerializer(StrictSerializer):
    value = serializers.FloatField(min_value=0, max_value=MAX_METRIC, validators=[finite],
                                   help_text="requests/s (the service's total) or GPU duty cycle (percent, mean).")
    p99_latency_ms = serializers.FloatField(min_value=0, max_value=3_600_000, validators=[finite], allow_null=True,
                                            required=False, help_text="p99 latency now, against latency_slo_ms.")
