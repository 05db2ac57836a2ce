"""API shapes of experiments, runs and alerts."""

from __future__ import annotations

from rest_framework import serializers

from core.serializers import StrictModelSerializer, StrictSerializer, no_control_characters
from notifications.webhooks import Refused, check_url
from tenancy.serializers import ScopedProjectField
from tracking import selectors
from tracking.models import Alert, AlertRule, ChartPanel, Experiment, Run, RunStatus, Webhook
from tracking.series import anomaly
from tracking.series.validate import shown_last


class ExperimentSerializer(StrictModelSerializer):
    project = ScopedProjectField()
    # Annotated by the viewset (set on create); without a default, an unannotated one leaves the key out rather than
    # answering null, which the schema does not allow.
    run_count = serializers.IntegerField(read_only=True, help_text="Runs in the experiment.")

    class Meta:
        model = Experiment
        fields = ["id", "project", "name", "description", "created_at", "run_count"]
        read_only_fields = ["created_at"]
        extra_kwargs = {"name": {"validators": [no_control_characters]}}


class SummaryField(serializers.DictField):
    """Run.summary as the API shows it: per key, `last` is a number or, when the last value logged was not finite,
    "NaN", "Infinity" or "-Infinity" (as the series API's markers and log-batch spell them), and `last_finite`
    tells which."""

    def to_representation(self, value: dict) -> dict:
        shown = {}
        for key, entry in value.items():
            last, finite = shown_last(entry)
            shown[key] = {**{name: v for name, v in entry.items() if name != "nonfinite"}, "last": last,
                          "last_finite": finite}
        return shown


class RunSerializer(StrictModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    experiment = serializers.PrimaryKeyRelatedField(read_only=True)
    experiment_name = serializers.CharField(source="experiment.name", read_only=True)
    summary = SummaryField(read_only=True, help_text='Per metric key: last (a number, or "NaN", "Infinity", '
                                                     '"-Infinity"), last_finite, step, min, max (of finite values).')
    state = serializers.SerializerMethodField(help_text='What the run is doing now: its status, or while its job '
                                                        'is not running its job\'s state ("Queued (preempted)", '
                                                        '"Retrying", "Starting"). The status stays RUNNING then.')

    class Meta:
        model = Run
        fields = ["id", "project", "experiment", "experiment_name", "job", "name", "user_name", "status", "state",
                  "note", "started_at", "ended_at", "attempt", "params", "tags", "summary", "muted_rules", "deleted_at"]

        read_only_fields = ["job", "user_name", "started_at", "ended_at", "attempt", "params", "tags", "muted_rules",
                            "deleted_at"]

    def get_state(self, run: Run) -> str:
        # A list's page computes its runs' states in two queries (RunViewSet.paginate_queryset); one run, here.
        shown = self.context.get("shown_states") or selectors.shown_states([run])
        return shown[run.pk].label


class RunCreateSerializer(StrictSerializer):
    project = ScopedProjectField()
    experiment = serializers.CharField(max_length=200, required=False, allow_blank=True,
                                       validators=[no_control_characters],
                                       help_text="Experiment name; created when the project has none of that name.")
    name = serializers.CharField(max_length=250, required=False, allow_blank=True)
    params = serializers.JSONField(required=False)
    tags = serializers.JSONField(required=False)


class RunUpdateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=250, required=False)
    note = serializers.CharField(max_length=20000, required=False, allow_blank=True)
    status = serializers.ChoiceField(choices=RunStatus.choices, required=False)


class RunTagsSerializer(StrictSerializer):
    set = serializers.JSONField(required=False, help_text="Tags to add or change: {key: value}.")
    remove = serializers.JSONField(required=False, help_text="Keys of tags to remove: [key].")


class RunGroupsSerializer(serializers.Serializer):
    """Only for the schema."""

    group_by = serializers.CharField()
    groups = serializers.ListField(child=serializers.DictField(), help_text=(
        '[{"value": "0.1" or null, "count": 3, "run_ids": [...], "metrics": {key: {"mean", "min", "max", "count"}}}]'))


class LogBatchSerializer(serializers.Serializer):
    """Only for the schema: the view validates the body itself (see tracking.series.validate)."""

    metrics = serializers.ListField(child=serializers.DictField(), required=False,
                                    help_text="Up to 10,000 points {key, value, step, timestamp (ms)}; value may "
                                              "be \"NaN\", \"Infinity\" or \"-Infinity\".")
    params = serializers.JSONField(required=False, help_text="{key: value} or [{key, value}]")
    tags = serializers.JSONField(required=False, help_text="{key: value} or [{key, value}]")
    attempt = serializers.IntegerField(required=False, min_value=1)


class SeriesSerializer(serializers.Serializer):
    key = serializers.CharField()
    total = serializers.IntegerField(help_text="Points in the series (or the asked step range) before downsampling.")
    points = serializers.ListField(child=serializers.ListField(), help_text="[step, value] of finite values.")
    markers = serializers.ListField(child=serializers.ListField(), help_text='[step, "NaN" | "Infinity" | '
                                                                            '"-Infinity"]')
    attempts = serializers.ListField(child=serializers.DictField(), help_text="First step of each attempt.")
    times = serializers.ListField(child=serializers.ListField(), required=False,
                                  help_text="[step, timestamp (ms)] of every step returned; only with ?times=1.")


class AlertSerializer(StrictModelSerializer):
    class Meta:
        model = Alert
        fields = ["id", "run", "rule", "key", "step", "value", "message", "opened_at", "resolved_at", "resolution",
                  "resolved_by", "acknowledged_at", "acknowledged_by"]


class MuteSerializer(StrictSerializer):
    rule = serializers.CharField(required=False, max_length=30,
                                 help_text="The rule to mute or unmute on the run; every rule when absent.")


class AlertRuleSerializer(StrictModelSerializer):
    project = ScopedProjectField()
    rule = serializers.ChoiceField(choices=anomaly.RULES)
    params = serializers.JSONField(required=False, help_text="Thresholds overriding the rule's defaults, e.g. "
                                                             '{"z": 8} for loss_spike (see docs/alerts.md).')
    defaults = serializers.SerializerMethodField(help_text="The rule's default thresholds.")

    class Meta:
        model = AlertRule
        fields = ["id", "project", "rule", "enabled", "params", "action", "defaults"]

    def get_defaults(self, obj: AlertRule) -> dict:
        return anomaly.DEFAULTS.get(obj.rule, {})

    def validate(self, attrs: dict) -> dict:
        rule = attrs.get("rule", self.instance.rule if self.instance else None)
        params = attrs.get("params", self.instance.params if self.instance else {})
        try:
            anomaly.check_params(rule, params)
        except anomaly.ParamError as e:
            raise serializers.ValidationError({e.field: [e.message]}) from None
        return attrs


class WebhookSerializer(StrictModelSerializer):
    project = ScopedProjectField()
    secret = serializers.CharField(write_only=True, min_length=16, max_length=200,
                                   help_text="Key of the X-Tidal-Signature HMAC; never shown again.")

    class Meta:
        model = Webhook
        fields = ["id", "project", "url", "secret", "enabled", "created_at"]
        read_only_fields = ["created_at"]

    def validate_url(self, value: str) -> str:
        try:
            check_url(value)
        except Refused as e:
            raise serializers.ValidationError(f"The URL {e}.") from None
        return value


class ReachedSerializer(serializers.Serializer):
    step = serializers.IntegerField()
    at = serializers.DateTimeField()
    cost = serializers.FloatField(allow_null=True)


class RunCostSerializer(serializers.Serializer):
    currency = serializers.CharField(allow_null=True)
    cost = serializers.FloatField(allow_null=True, help_text="So far; null for a run without a job.")
    target = serializers.CharField(allow_null=True)
    reached = ReachedSerializer(allow_null=True, help_text="Null when the target was not reached.")


class ScopedExperimentField(serializers.PrimaryKeyRelatedField):
    """An experiment by id among those the caller can see: another tenant's reads as missing."""

    def get_queryset(self):
        return selectors.experiments_for_user(self.context["request"].user)


class ChartPanelSerializer(StrictModelSerializer):
    experiment = ScopedExperimentField()
    keys = serializers.JSONField(help_text="The metric keys drawn: 1 to 10.")

    class Meta:
        model = ChartPanel
        fields = ["id", "experiment", "title", "keys", "scale", "smoothing", "x_axis", "group_by", "position",
                  "created_by", "created_at"]
        read_only_fields = ["created_by", "created_at"]
