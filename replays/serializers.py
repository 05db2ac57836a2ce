"""Replay runs: what POST /api/v1/replays/ accepts (multipart with files, or JSON for `source: history`) and what
a run looks like."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.serializers import StrictModelSerializer, StrictSerializer
from replays.models import ReplayRun


@extend_schema_field({"type": "string", "format": "binary", "description": "a file, or the word `current`"})
class FileOrCurrentField(serializers.Field):
    """An uploaded file, or the word `current` (the platform's inventory or quotas)."""

    default_error_messages = {"invalid": "Upload a file or give `current`."}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str):
            if data.strip().lower() == "current":
                return "current"
            self.fail("invalid")
        if hasattr(data, "read"):
            return data
        self.fail("invalid")

    def to_representation(self, value: Any) -> str:
        return "current" if value == "current" else getattr(value, "name", "upload")


class ReplayCreateSerializer(StrictSerializer):
    trace = serializers.FileField(required=False, allow_empty_file=False,
                                  help_text="A trace CSV (replay format or a Philly CSV); or use source=history.")
    source = serializers.ChoiceField(choices=["upload", "history"], required=False,
                                     help_text="history: export the last `days` of the platform's finished jobs.")
    days = serializers.IntegerField(required=False, min_value=1, max_value=366)
    cluster = FileOrCurrentField(required=False, default="current")
    quotas = FileOrCurrentField(required=False, default="current")
    quota_scale = serializers.FloatField(required=False, default=1.0, min_value=0.0,
                                         help_text="Scale of philly_vc_quota.csv node counts.")
    policy = serializers.CharField(required=False, default="production", max_length=40)
    compare = serializers.ListField(child=serializers.CharField(max_length=40), required=False, default=list,
                                    max_length=8)
    skip_invalid = serializers.BooleanField(required=False, default=False)
    elastic = serializers.FloatField(required=False, default=0.0, min_value=0.0, max_value=1.0,
                                     help_text="Share of the trace's jobs replayed elastic (issue 29), 0 to 1.")
    elastic_max_factor = serializers.FloatField(required=False, default=1.0, min_value=1.0, max_value=16.0,
                                                help_text="Elastic jobs may grow to this many times their size.")

    def validate_compare(self, value: list[str]) -> list[str]:
        names = [n.strip() for item in value for n in item.split(",") if n.strip()]
        if len(names) > 8:
            raise serializers.ValidationError("Compare at most 8 policies.")
        return names

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        source = attrs.get("source") or ("upload" if attrs.get("trace") is not None else None)
        if source is None:
            raise serializers.ValidationError({"trace": "Upload a trace CSV, or set source to history with days."})
        if source == "history" and attrs.get("trace") is not None:
            raise serializers.ValidationError({"source": "Give either an uploaded trace or source history, not both."})
        if source == "upload" and attrs.get("trace") is None:
            raise serializers.ValidationError({"trace": "No trace file uploaded."})
        if source == "history" and not attrs.get("days"):
            raise serializers.ValidationError({"days": "How many days of history to replay (e.g. 7)."})
        attrs["source"] = source
        return attrs


class ReplayRunSerializer(StrictModelSerializer):
    created_by = serializers.CharField(source="created_by_name", read_only=True)
    report_url = serializers.SerializerMethodField()

    class Meta:
        model = ReplayRun
        fields = ["id", "kind", "status", "message", "progress", "eta_seconds", "created_by", "created_at",
                  "started_at", "finished_at", "trace_source", "trace_name", "days", "cluster_source",
                  "quotas_source", "policy", "compare", "skip_invalid", "jobs", "skipped", "history", "change",
                  "summary", "comparison", "files", "report_url"]
        read_only_fields = fields

    def get_report_url(self, run: ReplayRun) -> str | None:
        if run.status != "succeeded":
            return None
        url = reverse("replay-report", kwargs={"pk": run.pk})
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request else url
