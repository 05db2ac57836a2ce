"""The API's shapes of telemetry: a cluster's source, an attempt's GPU efficiency, its GPUs and their readings."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.serializers import StrictModelSerializer, StrictSerializer
from telemetry.models import AttemptGpu, AttemptTelemetry, TelemetrySource


class TelemetrySourceSerializer(StrictModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = TelemetrySource
        fields = ["cluster", "enabled", "pod_label", "namespace_label", "node_label", "gpu_label", "uuid_label",
                  "host_label", "selector", "read_through", "last_read_at", "last_error"]
        read_only_fields = ["cluster", "read_through", "last_read_at", "last_error"]
        # The service checks the labels and names the field; the model's length limits still apply here.
        extra_kwargs = {name: {"allow_blank": True} for name in ("pod_label", "node_label", "gpu_label")}


class TelemetrySourceCreateSerializer(TelemetrySourceSerializer):
    cluster = serializers.CharField(max_length=63)

    class Meta(TelemetrySourceSerializer.Meta):
        read_only_fields = ["read_through", "last_read_at", "last_error"]


class AttemptGpuSerializer(StrictModelSerializer):
    class Meta:
        model = AttemptGpu
        fields = ["ordinal", "node", "gpu", "uuid", "last_at", "last_sm_active", "last_utilization",
                  "last_memory_used_gib", "last_power_watts"]


class GpuActivitySerializer(StrictModelSerializer):
    """A GPU's latest readings; its job and project only for their members (others read "other")."""

    cluster = serializers.CharField(source="attempt.cluster.name", read_only=True, default=None)
    sm_active = serializers.FloatField(source="last_sm_active", read_only=True, allow_null=True)
    utilization = serializers.FloatField(source="last_utilization", read_only=True, allow_null=True)
    memory_used_gib = serializers.FloatField(source="last_memory_used_gib", read_only=True, allow_null=True)
    power_watts = serializers.FloatField(source="last_power_watts", read_only=True, allow_null=True)
    project = serializers.SerializerMethodField()
    job = serializers.SerializerMethodField()

    class Meta:
        model = AttemptGpu
        fields = ["cluster", "node", "gpu", "uuid", "last_at", "sm_active", "utilization", "memory_used_gib",
                  "power_watts", "project", "job"]

    def _mine(self, gpu: AttemptGpu) -> bool:
        return gpu.attempt.job.project_id in self.context["visible"]

    def get_project(self, gpu: AttemptGpu) -> str:
        return gpu.attempt.job.project.slug if self._mine(gpu) else "other"

    def get_job(self, gpu: AttemptGpu) -> int | None:
        return gpu.attempt.job_id if self._mine(gpu) else None


class AttemptTelemetrySerializer(StrictModelSerializer):
    id = serializers.IntegerField(source="attempt_id", read_only=True)
    job = serializers.IntegerField(source="attempt.job_id", read_only=True)
    attempt = serializers.IntegerField(source="attempt.number", read_only=True)
    project = serializers.CharField(source="attempt.job.project.slug", read_only=True)
    cluster = serializers.CharField(source="attempt.cluster.name", read_only=True, default=None)
    sm_active = serializers.FloatField(read_only=True, help_text="Mean SM activity (%): the GPU efficiency.")
    utilization = serializers.FloatField(read_only=True, help_text="Mean DCGM GPU utilization (%).")

    class Meta:
        model = AttemptTelemetry
        fields = ["id", "job", "attempt", "project", "cluster", "sm_active", "utilization", "first_at", "last_at",
                  "idle_since"]


class ReadingsSerializer(StrictSerializer):
    start = serializers.IntegerField(allow_null=True, help_text="ms: the first bucket's start")
    bucket_ms = serializers.IntegerField()
    series = serializers.DictField(help_text="field -> GPU ordinal -> the mean of each bucket (null: no reading)")


class AttemptTelemetryDetailSerializer(AttemptTelemetrySerializer):
    gpus = serializers.SerializerMethodField()
    readings = serializers.SerializerMethodField()

    class Meta(AttemptTelemetrySerializer.Meta):
        fields = [*AttemptTelemetrySerializer.Meta.fields, "gpus", "readings"]

    def get_gpus(self, tally: AttemptTelemetry) -> list[dict[str, Any]]:
        return list(AttemptGpuSerializer(self.context["gpus"], many=True).data)

    def get_readings(self, tally: AttemptTelemetry) -> dict[str, Any]:
        readings = self.context["readings"]
        return {"start": readings.start, "bucket_ms": readings.bucket_ms,
                "series": {name: {str(k): v for k, v in by_gpu.items()} for name, by_gpu in readings.series.items()}}
