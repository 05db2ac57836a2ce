from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core import k8snames
from core.serializers import FieldsBuiltOnce, FreeFormJSON, StrictSerializer, WholeNumberField, no_control_characters
from jobs import ports, selectors
from jobs.models import (
    NOT_RESIZABLE,
    Attempt,
    AttemptResize,
    Job,
    JobEvent,
    Launcher,
    Outcome,
    ReplicaGroup,
    Stage,
    Topology,
)
from jobs.states import HOLDING, State
from quotas import selectors as quota_selectors
from tenancy.serializers import ScopedProjectField


@extend_schema_field(OpenApiTypes.STR)
class CatalogNameField(serializers.Field):
    """A flavor or priority class given by name, looked up in the catalog copy instead of a query per request."""

    default_error_messages = {"does_not_exist": "No {noun} is named {value!r}.", "invalid": "A name is required."}

    def __init__(self, table: str, noun: str, **kwargs) -> None:
        self.table = table
        self.noun = noun
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) or not data:
            self.fail("invalid")
        found = quota_selectors.catalog_entry(self.table, data)
        if found is None:
            self.fail("does_not_exist", noun=self.noun, value=data[:100])
        return found

    def to_representation(self, value) -> str:
        return value.name


MAX_REPLICAS = 1024


@extend_schema_field({"oneOf": [
    {"type": "integer", "minimum": 1, "maximum": MAX_REPLICAS},
    {"type": "object", "properties": {"min": {"type": "integer", "minimum": 1, "maximum": MAX_REPLICAS},
                                      "max": {"type": "integer", "minimum": 1, "maximum": MAX_REPLICAS}},
     "required": ["min", "max"], "additionalProperties": False}]})
class ReplicasField(serializers.Field):
    """A group's replicas: a whole number (a rigid gang of exactly that many) or {"min": m, "max": n} (elastic: it
    runs on m..n workers). Internally (min, max); a rigid gang's min is its max."""

    default_error_messages = {
        "invalid": 'A whole number of replicas, or {{"min": ..., "max": ...}} for an elastic group.',
        "keys": 'Give exactly "min" and "max" (unknown: {keys}).',
        "order": "min ({low}) must be at most max ({high}).",
    }

    def to_internal_value(self, data: Any) -> tuple[int, int]:
        number = WholeNumberField(min_value=1, max_value=MAX_REPLICAS)
        if isinstance(data, dict):
            unknown = sorted(set(data) - {"min", "max"})
            if unknown or not {"min", "max"} <= set(data):
                self.fail("keys", keys=", ".join(map(str, unknown)) or "none")
            bounds = []
            for key in ("min", "max"):
                try:
                    bounds.append(number.run_validation(data[key]))
                except serializers.ValidationError as error:
                    raise serializers.ValidationError({key: error.detail}) from None
            low, high = bounds
            if low > high:
                self.fail("order", low=low, high=high)
            return low, high
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            count = number.run_validation(data)
            return count, count
        if isinstance(data, str):
            number.run_validation(data)  # names the text given
        self.fail("invalid")
        raise AssertionError  # unreachable: fail() raises

    def to_representation(self, value: Any) -> Any:
        low, high = value
        return high if low == high else {"min": low, "max": high}


class ReplicaGroupInput(StrictSerializer):
    role = serializers.RegexField(r"\A[a-z0-9]([a-z0-9-]{0,18}[a-z0-9])?\Z", max_length=20, default="worker",
                                  error_messages={"invalid": "Use 1-20 lowercase letters, digits and dashes."})
    replicas = ReplicasField(help_text='A whole number, or {"min": m, "max": n}: elastic, runs on m..n workers.')
    devices = WholeNumberField(min_value=0, max_value=64, help_text="Devices per replica.")
    flavor = CatalogNameField("flavors", "flavor")
    cpu_millis = WholeNumberField(min_value=100, max_value=1_024_000, default=4000)
    memory_mib = WholeNumberField(min_value=128, max_value=16_777_216, default=16384)
    rdma = serializers.BooleanField(default=False)

    def to_internal_value(self, data: Any) -> dict:
        """`replicas` as the model stores it: the maximum, and `min_replicas` the minimum when it is lower (None: a
        rigid gang; {min: n, max: n} is one too)."""
        group = super().to_internal_value(data)
        low, high = group["replicas"]
        group["replicas"], group["min_replicas"] = high, (low if low < high else None)
        return group


class WaitingSerializer(serializers.Serializer):
    """Why a queued job waits: the scheduler's reason, its positions and its estimated start with its range, or why
    it has none."""

    code = serializers.CharField()
    reason = serializers.CharField()
    project_position = serializers.IntegerField(allow_null=True)
    flavor_position = serializers.IntegerField(allow_null=True)
    eta = serializers.DateTimeField(allow_null=True, help_text=(
        'Estimated start; with eta_note "no earlier than" a bound: the forecast did not reach the job in its budget.'))
    eta_low = serializers.DateTimeField(allow_null=True, help_text="Early end of the estimate's range (p10).")
    eta_high = serializers.DateTimeField(allow_null=True, help_text=(
        "Late end of the range (p90), with arrivals like the last hour's; null: later than the forecast looked."))
    eta_note = serializers.CharField(help_text=(
        'Why eta is a bound or null: "no earlier than", "beyond 24 h", "no runtime known", "budget spent", '
        '"nodes unavailable", "not as things stand"; empty: an estimate, or none made yet.'))


class JobSubmitSerializer(StrictSerializer):
    """The job spec, from JSON or a YAML file with the same fields."""

    project = ScopedProjectField()
    name = serializers.RegexField(r"\A[A-Za-z0-9][A-Za-z0-9._ -]*\Z", max_length=200,
                                  error_messages={"invalid": "Use letters, digits, spaces, dots, dashes, underscores."})
    stage = serializers.ChoiceField(choices=Stage.choices, default=Stage.OTHER)
    launcher = serializers.ChoiceField(choices=Launcher.choices, default=Launcher.PYTORCH)
    image = serializers.CharField(max_length=500)
    command = serializers.ListField(child=serializers.CharField(max_length=4096), min_length=1, max_length=100)
    args = serializers.ListField(child=serializers.CharField(max_length=4096), max_length=500, default=list)
    env = serializers.DictField(child=serializers.CharField(max_length=32768, allow_blank=True), default=dict,
                                validators=[FreeFormJSON()])
    launcher_options = serializers.DictField(default=dict, validators=[FreeFormJSON()], help_text=(
        "megatron: tensor_parallel, pipeline_parallel; ray: entrypoint; pytorch: nproc_per_node."))
    groups = ReplicaGroupInput(many=True, allow_empty=False, max_length=8)
    topology = serializers.ChoiceField(choices=Topology.choices, default=Topology.NONE)
    priority_class = CatalogNameField("priority_classes", "priority class", required=False)
    max_runtime = WholeNumberField(min_value=1, max_value=90 * 86400, required=False, allow_null=True)
    min_runtime = WholeNumberField(min_value=0, max_value=30 * 86400, default=0)
    retry_limit = WholeNumberField(min_value=0, max_value=20, default=0)
    retry_backoff = WholeNumberField(min_value=0, max_value=86400, default=30)
    permanent_exit_codes = serializers.ListField(child=WholeNumberField(min_value=1, max_value=255),
                                                 max_length=50, default=list)
    checkpoint_path = serializers.CharField(max_length=500, required=False, allow_blank=True, default="",
                                            validators=[no_control_characters])
    labels = serializers.DictField(child=serializers.CharField(max_length=63, allow_blank=True), default=dict,
                                   validators=[FreeFormJSON()])
    experiment = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                       validators=[no_control_characters])
    duration = WholeNumberField(min_value=1, max_value=90 * 86400, required=False, allow_null=True,
                                        help_text="Simulated clusters only: how long the job runs.")
    scaling_efficiency = serializers.FloatField(min_value=0.0, max_value=1.0, default=0.9, help_text=(
        "Elastic jobs: the share of one worker's throughput each added worker brings (0..1)."))
    resize_cooldown = WholeNumberField(min_value=0, max_value=7 * 86400, default=300, help_text=(
        "Elastic jobs: seconds between two resizes."))

    def validate_env(self, env: dict) -> dict:
        if len(env) > 200:
            raise serializers.ValidationError("At most 200 variables.")
        bad = sorted(name for name in env if not k8snames.is_env_name(name))
        if bad:
            raise serializers.ValidationError(
                f"Not valid variable names: {', '.join(map(repr, bad))}. Use letters, digits, '_', '-' and '.', "
                "not starting with a digit.")
        reserved = sorted(name for name in env if ports.is_reserved_env(name))
        if reserved:
            raise serializers.ValidationError(f"Set by the platform, cannot be overridden: {', '.join(reserved)}.")
        return env

    def validate_labels(self, labels: dict) -> dict:
        if len(labels) > 64:
            raise serializers.ValidationError("At most 64.")
        for key, value in sorted(labels.items()):
            problem = k8snames.label_key_problem(key)
            if problem:
                raise serializers.ValidationError(f"Label key {key!r} is not valid: {problem}.")
            reserved = k8snames.reserved_label_domain(key)
            if reserved:
                raise serializers.ValidationError(
                    f"Label key {key!r}: the prefix {reserved}/ (and its subdomains) is kept by the platform.")
            if not k8snames.is_label_value(value):
                raise serializers.ValidationError(
                    f"Label {key!r}: the value {value!r} is not valid: at most 63 letters, digits, '-', '_' or '.', "
                    "starting and ending with a letter or digit (or empty).")
        return labels

    def validate_checkpoint_path(self, path: str) -> str:
        if ".." in path.replace("\\", "/").split("/"):
            raise serializers.ValidationError("Must not contain a '..' segment: name the checkpoint directory itself.")
        return path

    def validate_image(self, image: str) -> str:
        if not k8snames.is_image_reference(image):
            raise serializers.ValidationError(
                "Not an image reference: [registry/]repository[:tag][@digest], the repository in lowercase, "
                "without spaces (e.g. ghcr.io/acme/train:1).")
        return image

    def validate(self, attrs):
        roles = [g["role"] for g in attrs["groups"]]
        if len(roles) != len(set(roles)):
            raise serializers.ValidationError({"groups": ["Each replica group needs its own role."]})
        options = attrs.get("launcher_options", {})
        if attrs.get("launcher") == Launcher.MEGATRON:
            world = sum(g["replicas"] * max(1, g["devices"]) for g in attrs["groups"])
            for key in ("tensor_parallel", "pipeline_parallel"):
                size = options.get(key, 1)
                if not isinstance(size, int) or size < 1:
                    raise serializers.ValidationError({f"launcher_options.{key}": ["A positive integer."]})
            product = options.get("tensor_parallel", 1) * options.get("pipeline_parallel", 1)
            if world % product:
                raise serializers.ValidationError({"launcher_options": [
                    f"tensor_parallel x pipeline_parallel ({product}) must divide the world size ({world})."]})
        if attrs.get("launcher") == Launcher.RAY and not str(options.get("entrypoint", "")).strip():
            raise serializers.ValidationError({"launcher_options.entrypoint": ["Ray jobs need an entrypoint."]})
        self._validate_elastic(attrs)
        return attrs

    @staticmethod
    def _validate_elastic(attrs: dict) -> None:
        """An elastic group (min < max) needs a launcher that can resize, no topology rule (grown replicas go on any
        node of the flavor) and a project that allows elastic jobs."""
        elastic = [i for i, g in enumerate(attrs["groups"]) if g.get("min_replicas") is not None]
        if not elastic:
            return
        field = f"groups[{elastic[0]}].replicas"
        launcher = attrs.get("launcher", Launcher.PYTORCH)
        if launcher in NOT_RESIZABLE:
            raise serializers.ValidationError({field: [
                f"min < max makes the group elastic, which the {launcher} launcher cannot do: "
                f"{NOT_RESIZABLE[launcher]}. Give a whole number of replicas."]})
        if launcher == Launcher.RAY and elastic[0] == 0:
            raise serializers.ValidationError({field: [
                "A Ray job's first group is its head, one pod: make the worker group elastic instead."]})
        if attrs.get("topology", Topology.NONE) != Topology.NONE:
            raise serializers.ValidationError({"topology": [
                "An elastic job (replicas: {min, max}) takes no topology rule: the scheduler places grown replicas "
                "on any node of the flavor. Use topology: none, or a whole number of replicas."]})
        project = attrs.get("project")
        if project is not None and not project.elastic_jobs:
            raise serializers.ValidationError({field: [
                f"Project {project.slug} does not allow elastic jobs (its admins turned them off): give a whole "
                "number of replicas."]})


class ScaleSerializer(StrictSerializer):
    """A new maximum for an elastic job's group."""

    max = WholeNumberField(min_value=1, max_value=MAX_REPLICAS, help_text="The group's new maximum replicas.")
    role = serializers.CharField(max_length=40, required=False, allow_null=True, default=None,
                                 help_text="The elastic group (needed only when the job has several).")


class WorkersSerializer(serializers.Serializer):
    """An elastic job's size: the workers its current attempt runs (null: none runs) of min..max."""

    running = serializers.IntegerField(allow_null=True)
    min = serializers.IntegerField()
    max = serializers.IntegerField()
    min_devices = serializers.IntegerField(help_text="What admission needs: every group at its minimum.")
    summary = serializers.CharField(help_text='e.g. "running 6 of 2..8 workers", "needs 2..8 workers"')


def workers_of(job: Job) -> dict | None:
    """The `elastic` block of a job whose groups are loaded (None: a rigid gang)."""
    groups = list(job.groups.all())
    if not any(g.min_replicas is not None for g in groups):
        return None
    least, most = sum(g.needed for g in groups), sum(g.replicas for g in groups)
    attempt = job.current_attempt if job.state in HOLDING else None
    running = len(attempt.placement) if attempt is not None else None
    summary = (f"running {running} of {least}..{most} workers" if running is not None
               else f"needs {least}..{most} workers")
    return {"running": running, "min": least, "max": most, "min_devices": job.total_devices, "summary": summary}


class RelatedRows(serializers.ListSerializer):
    """A nested list taken from `context["related"][<field name>]` when the caller passes the rows it just wrote
    (a new job's groups, events and attempts), so they are rendered without being read back; otherwise read as
    usual."""

    def get_attribute(self, instance):
        given = self.context.get("related", {}).get(self.field_name)
        return given if given is not None else super().get_attribute(instance)


class ReplicaGroupOutput(FieldsBuiltOnce, serializers.ModelSerializer):
    flavor = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = ReplicaGroup
        fields = ["role", "replicas", "min_replicas", "devices", "flavor", "cpu_millis", "memory_mib", "rdma"]
        list_serializer_class = RelatedRows


class JobEventSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["created_at", "attempt", "kind", "from_state", "to_state", "reason", "actor_name", "details"]
        list_serializer_class = RelatedRows


class AttemptResizeSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    class Meta:
        model = AttemptResize
        fields = ["at", "kind", "old_replicas", "new_replicas", "old_devices", "new_devices", "reason", "for_job",
                  "replicas"]
        read_only_fields = fields


class AttemptSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    """One attempt of a job: where it ran, when, why it ended, and (an elastic job's) its resizes: its replicas over
    time are its admission's placement, then each resize's new_replicas from its `at` on."""

    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    devices = serializers.IntegerField(read_only=True)
    # Declared: a read-only model field loses allow_blank, and the schema then left out the open attempt's "".
    outcome = serializers.ChoiceField(choices=Outcome.choices, allow_blank=True, read_only=True,
                                      help_text="Empty while the attempt is open.")
    resizes = AttemptResizeSerializer(many=True, read_only=True)

    class Meta:
        model = Attempt
        fields = ["number", "cluster", "placement", "devices", "borrowed", "admitted_at", "started_at", "ended_at",
                  "outcome", "cause", "reason", "exit_code", "details", "checkpoint", "checkpoint_step",
                  "checkpoint_at", "log_location", "resizes"]
        read_only_fields = fields
        list_serializer_class = RelatedRows


class JobSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    """A job with its current attempt's times and cluster: none while it waits in the queue for a new attempt."""

    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    flavor = serializers.SlugRelatedField(slug_field="name", read_only=True)
    priority_class = serializers.SlugRelatedField(slug_field="name", read_only=True)
    submitter = serializers.CharField(source="submitter_name", read_only=True)
    cluster = serializers.CharField(source="current_attempt.cluster.name", read_only=True, allow_null=True)
    admitted_at = serializers.DateTimeField(source="current_attempt.admitted_at", read_only=True, allow_null=True)
    started_at = serializers.DateTimeField(source="current_attempt.started_at", read_only=True, allow_null=True)
    ended_at = serializers.DateTimeField(source="current_attempt.ended_at", read_only=True, allow_null=True,
                                         help_text="When the current attempt ended (a retrying or finished job).")
    borrowed = serializers.IntegerField(source="current_attempt.borrowed", read_only=True, allow_null=True)
    failure_cause = serializers.CharField(source="current_attempt.cause", read_only=True, allow_null=True)
    waiting = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = ["id", "name", "project", "submitter", "stage", "launcher", "state", "attempt", "priority_class",
                  "flavor", "total_devices", "topology", "submitted_at", "admitted_at", "started_at", "ended_at",
                  "finished_at", "cluster", "borrowed", "waiting", "failure_cause", "experiment", "labels"]
        read_only_fields = fields

    @extend_schema_field(WaitingSerializer(allow_null=True))
    def get_waiting(self, job: Job) -> dict | None:
        if job.state != State.QUEUED:
            return None
        return {"code": job.wait_code, "reason": job.wait_reason or "waiting for the next scheduling cycle",
                "project_position": job.project_position, "flavor_position": job.flavor_position, "eta": job.eta,
                "eta_low": job.eta_low, "eta_high": job.eta_high, "eta_note": job.eta_note}


class JobDetailSerializer(JobSerializer):
    """Everything about a job. `context["related"]` may hold the groups, attempts and events just written (a new
    job's), so it is rendered without reading them back. The env's values only for those who may read them
    (`jobs.selectors.may_read_env`; the caller is `context["request"].user`): others get its names with hidden
    values."""

    placement = serializers.JSONField(source="current_attempt.placement", read_only=True, allow_null=True)
    env = serializers.SerializerMethodField()
    groups = ReplicaGroupOutput(many=True, read_only=True)
    attempts = AttemptSerializer(many=True, read_only=True)
    events = JobEventSerializer(many=True, read_only=True)
    elastic = serializers.SerializerMethodField()

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "image", "command", "args", "env", "launcher_options", "groups",
                  "placement", "max_runtime", "min_runtime", "retry_limit", "retry_backoff", "permanent_exit_codes",
                  "checkpoint_path", "duration", "retry_at", "attempts", "events", "elastic", "scaling_efficiency",
                  "resize_cooldown"]
        read_only_fields = fields

    @extend_schema_field(WorkersSerializer(allow_null=True))
    def get_elastic(self, job: Job) -> dict | None:
        given = self.context.get("related", {}).get("groups")
        if given is not None:  # a job just submitted: queued, its groups not read back
            least = sum(g.needed for g in given)
            if not any(g.min_replicas is not None for g in given):
                return None
            most = sum(g.replicas for g in given)
            return {"running": None, "min": least, "max": most, "min_devices": job.total_devices,
                    "summary": f"needs {least}..{most} workers"}
        return workers_of(job)

    @extend_schema_field(serializers.DictField(child=serializers.CharField()))
    def get_env(self, job: Job) -> dict[str, str]:
        request = self.context.get("request")
        return selectors.env_shown_to(request.user if request else AnonymousUser(), job)


class QueueJobSerializer(JobSerializer):
    """A waiting job, with an elastic job's bounds (its total_devices is its minimum need)."""

    elastic = serializers.SerializerMethodField()

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "elastic"]
        read_only_fields = fields

    @extend_schema_field(WorkersSerializer(allow_null=True))
    def get_elastic(self, job: Job) -> dict | None:
        return workers_of(job)


class CheckpointSerializer(StrictSerializer):
    checkpoint = serializers.CharField(max_length=500, help_text="What was saved: a path (what the next attempt is "
                                       "given in TIDAL_RESUME_FROM), a step, or both.")
    step = serializers.IntegerField(min_value=0, max_value=2**63 - 1, required=False, allow_null=True, default=None,
                                    help_text="The training step it holds (TIDAL_RESUME_STEP of the next attempt).")


class LogQuerySerializer(serializers.Serializer):
    """Query parameters of the logs endpoint (not strict: other parameters, such as format, pass through)."""

    replica = serializers.CharField(max_length=40, required=False, default="", allow_blank=True)
    attempt = serializers.IntegerField(min_value=1, max_value=32767, required=False, default=None, allow_null=True,
                                       help_text="An attempt's number (default: the current or last attempt).")
    tail = serializers.IntegerField(min_value=1, max_value=5000, default=200)
    follow = serializers.BooleanField(default=False)
    cursor = serializers.CharField(max_length=64, required=False, default="", allow_blank=True,
                                   help_text="With follow: resume a paused stream (the cursor= of its last line).")

    def validate(self, data: dict) -> dict:
        if data["cursor"] and not data["follow"]:
            raise serializers.ValidationError({"cursor": "A cursor resumes a followed stream: give follow=true too."})
        return data


class JobLogsSerializer(serializers.Serializer):
    """Log tail of one replica of an attempt; `source` is pod or simulated (live), kept (stored when the attempt
    ended) or none."""

    job = serializers.IntegerField()
    attempt = serializers.IntegerField(allow_null=True)
    replica = serializers.CharField()
    source = serializers.ChoiceField(choices=["pod", "simulated", "kept", "none"])
    lines = serializers.ListField(child=serializers.CharField(allow_blank=True))
    message = serializers.CharField(allow_blank=True)


class CauseCountSerializer(serializers.Serializer):
    cause = serializers.CharField()
    count = serializers.IntegerField()


class RackCauseCountSerializer(CauseCountSerializer):
    rack = serializers.CharField()


class FailureCausesSerializer(serializers.Serializer):
    project = serializers.CharField(allow_null=True)
    total = serializers.IntegerField()
    by_cause = CauseCountSerializer(many=True)
    by_rack = RackCauseCountSerializer(many=True)
