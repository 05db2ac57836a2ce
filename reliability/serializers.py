"""Shapes of reliability's API: diagnoses (read-only), staff's failure patterns, quarantine requests and the
report's query."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework import serializers

from core.serializers import StrictModelSerializer, StrictSerializer
from jobs.failures import CAUSES
from reliability import rules
from reliability.models import Diagnosis, FailurePattern, ProjectPolicy
from tenancy.serializers import ScopedProjectField


class DiagnosisSerializer(StrictModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    attempt = serializers.IntegerField(source="attempt.number", read_only=True)
    attempt_id = serializers.IntegerField(read_only=True)
    job = serializers.IntegerField(source="job_id", read_only=True)
    action_text = serializers.CharField(read_only=True)

    class Meta:
        model = Diagnosis
        fields = ["id", "job", "attempt", "attempt_id", "project", "cluster", "outcome", "cause", "kind",
                  "confidence", "summary", "action", "action_text", "evidence", "nodes", "quarantined", "devices",
                  "ran_seconds", "lost_seconds", "ended_at"]
        read_only_fields = fields


class FailurePatternSerializer(StrictModelSerializer):
    source = serializers.ChoiceField(choices=rules.SOURCES, default=rules.LOG)
    cause = serializers.ChoiceField(choices=CAUSES)
    action = serializers.ChoiceField(choices=["", *rules.ACTIONS], default="", allow_blank=True)
    quarantine = serializers.ChoiceField(choices=["", rules.QUARANTINE_NOW, rules.QUARANTINE_COUNT], default="",
                                         allow_blank=True)
    confidence = serializers.FloatField(min_value=0.01, max_value=1.0, default=0.8)

    class Meta:
        model = FailurePattern
        fields = ["id", "pattern", "source", "cause", "confidence", "action", "quarantine", "context", "description",
                  "enabled", "created_at", "created_by"]
        read_only_fields = ["id", "created_at", "created_by"]


class QuarantineSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=500)


class ReleaseSerializer(StrictSerializer):
    note = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")


class NodeQuarantineSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    cluster = serializers.CharField(source="cluster.name")
    name = serializers.CharField()
    quarantined_at = serializers.DateTimeField(allow_null=True)
    quarantine_reason = serializers.CharField()


class ReportQuerySerializer(StrictSerializer):
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    project = serializers.CharField(required=False, max_length=100)

    def validate(self, attrs: dict) -> dict:
        until = attrs.get("until") or timezone.now()
        since = attrs.get("since") or until - timedelta(days=28)
        if since >= until:
            raise serializers.ValidationError({"since": ["since must be before until."]})
        if until - since > timedelta(days=400):
            raise serializers.ValidationError({"since": ["A report covers at most 400 days."]})
        return {**attrs, "since": since, "until": until}


class ProjectPolicySerializer(StrictModelSerializer):
    project = ScopedProjectField()

    class Meta:
        model = ProjectPolicy
        fields = ["id", "project", "restart_on_hang"]
