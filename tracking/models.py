"""Experiments, runs and the points they log ("tracking": not the platform's own Prometheus metrics).

A job's run is created when the job is first admitted and continues across its attempts: each point carries the
number of the attempt that logged it, and the attempts' times come from the job's own attempt rows. A run may also
exist without a job (a notebook, another cluster).
"""

from __future__ import annotations

from dataclasses import fields

from django.conf import settings
from django.db import models

from core.choices import TextChoices
from jobs.models import Job
from tenancy.models import Project
from tracking.series.rollup import Aggregate


class Experiment(models.Model):
    """Runs grouped within a project, e.g. "llama-8b sft sweep". A job's `experiment` field names it."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="experiments", db_index=False)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, max_length=5000)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="experiment_name_per_project")]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.name}"


ALL_RULES = "*"  # in Run.muted_rules: every rule


class RunStatus(TextChoices):
    # MLflow's names, so its client reads them unchanged.
    RUNNING = "RUNNING", "Running"
    FINISHED = "FINISHED", "Finished"
    FAILED = "FAILED", "Failed"
    KILLED = "KILLED", "Killed"


class Run(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs", db_index=False)
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="runs")
    job = models.OneToOneField(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="run")
    name = models.CharField(max_length=250)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    user_name = models.CharField(max_length=150, blank=True, help_text="Kept when the account is deleted.")
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.RUNNING)
    note = models.TextField(blank=True, max_length=20000)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    # Flat string key/values, as MLflow's params and tags are; filtered with JSON lookups.
    params = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    # Per metric key: {"last", "min", "max", "step", "ts"}; kept by ingestion so the runs table never reads points.
    summary = models.JSONField(default=dict, blank=True)
    attempt = models.PositiveSmallIntegerField(default=1, help_text="The attempt new points belong to.")
    # Per attempt number: [first step, its timestamp (ms)], where a chart marks the attempt's start.
    attempt_starts = models.JSONField(default=dict, blank=True)
    # Anomaly detection's rolling state per metric key (tracking.series.anomaly), so a batch never reads points back.
    detector_state = models.JSONField(default=dict, blank=True)
    # The highest step logged and when it was first logged: what the hung-run check compares with the clock.
    last_step = models.BigIntegerField(null=True, blank=True)
    last_step_at = models.DateTimeField(null=True, blank=True)
    muted_rules = models.JSONField(default=list, blank=True,
                                   help_text=f'Rules that open no alert on this run; "{ALL_RULES}" mutes every rule.')
    # MLflow's lifecycle stage: a deleted run is hidden from lists and searches unless asked for, takes no more data,
    # and comes back whole when restored (its points, params and artifacts are kept until it is purged).
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["project", "-started_at"], name="tracking_run_project_idx")]

    def __str__(self) -> str:
        return f"run {self.pk} {self.name}"

    @property
    def is_finished(self) -> bool:
        return self.status != RunStatus.RUNNING

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None


class AxisScale(TextChoices):
    LINEAR = "linear", "Linear"
    LOG = "log", "Log"


class XAxis(TextChoices):
    STEP = "step", "Step"
    WALL = "wall", "Wall time"
    RELATIVE = "relative", "Relative time"


class ChartPanel(models.Model):
    """A chart saved on an experiment's page for everyone in its project: which metrics it draws (several in one
    panel), how (axis scale, smoothing, x axis) and, optionally, its runs grouped by a param's or tag's value (each
    group's mean with a min-max band)."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="panels")
    title = models.CharField(max_length=200, blank=True)
    keys = models.JSONField(default=list, help_text="The metric keys drawn, 1 to 10.")
    scale = models.CharField(max_length=10, choices=AxisScale.choices, default=AxisScale.LINEAR)
    smoothing = models.FloatField(default=0.0, help_text="The exponential moving average's weight, 0 to 0.99.")
    x_axis = models.CharField(max_length=10, choices=XAxis.choices, default=XAxis.STEP)
    group_by = models.CharField(max_length=260, blank=True, help_text="param.<key> or tag.<key>; empty: no grouping.")
    position = models.PositiveIntegerField(default=0)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["experiment", "position", "id"]

    def __str__(self) -> str:
        return f"panel {self.pk} of experiment {self.experiment_id}"


class Series(models.Model):
    """One metric key of a run. Its points' blocks and rollups refer to it by a small integer, so their indexes
    hold integers only, and a key's text is stored once per run."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="series", db_index=False)
    key = models.CharField(max_length=250)
    raw_pruned = models.BooleanField(default=False, help_text="Raw points deleted by retention: read from rollups.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="one_series_per_key")]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.key}"


class PointBlock(models.Model):
    """A stretch of one series' points of one attempt, in step order, one step a point: their steps, timestamps (ms)
    and values (float64: NaN, +Inf and -Inf kept as such) packed as little-endian arrays (tracking.points).

    A batch writes one block per key, not one row per point: PostgreSQL spent 15-24 ms of CPU a 10,000-point batch
    storing rows and their index entries, against 2-4 ms for the five blocks. A point is still identified by
    (series, step, attempt): the blocks of a series and attempt never overlap in steps, and a batch that meets
    stored points is merged with the blocks it overlaps (tracking.points.write_points), so a retried batch leaves
    the same points. Reads decode the blocks of the step range they ask for."""

    pk = models.CompositePrimaryKey("series", "attempt", "first_step")
    # No foreign-key constraint in the database, as the rows of points before had none: the write path takes series
    # ids under the run's row lock in the same transaction (tracking.points), and series are deleted only through
    # Django, whose cascade deletes their blocks first.
    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="blocks", db_index=False,
                               db_constraint=False)
    attempt = models.PositiveSmallIntegerField()
    first_step = models.BigIntegerField()
    last_step = models.BigIntegerField()
    count = models.PositiveIntegerField()
    # The range of the timestamps, which are in no particular order (what reads by time select blocks by).
    min_timestamp = models.BigIntegerField()
    max_timestamp = models.BigIntegerField()
    steps = models.BinaryField()
    timestamps = models.BinaryField()
    values = models.BinaryField()

    class Meta:
        # Where a batch looks for blocks it overlaps: those of its series and attempt ending at or after its first
        # step (none, when it continues the series).
        indexes = [models.Index(fields=["series", "attempt", "last_step"], name="tracking_block_end_idx")]

    def __str__(self) -> str:
        return f"series {self.series_id} attempt {self.attempt} steps {self.first_step}-{self.last_step}"


class Rollup(models.Model):
    """The aggregate of one chunk of a series at one level (tracking.series.rollup): what long series are read
    from."""

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="rollups", db_index=False)
    level = models.PositiveSmallIntegerField()
    chunk = models.BigIntegerField()
    count = models.PositiveIntegerField(help_text="Points written into the chunk (a rewritten point counts again).")
    first_step = models.BigIntegerField()
    last_step = models.BigIntegerField()
    last_value = models.FloatField(null=True)
    finite = models.PositiveIntegerField(default=0)
    total = models.FloatField(default=0.0)
    min_step = models.BigIntegerField(null=True)
    min_value = models.FloatField(null=True)
    max_step = models.BigIntegerField(null=True)
    max_value = models.FloatField(null=True)
    nan_step = models.BigIntegerField(null=True)
    posinf_step = models.BigIntegerField(null=True)
    neginf_step = models.BigIntegerField(null=True)

    AGGREGATE_FIELDS = [f.name for f in fields(Aggregate) if f.name != "chunk"]

    class Meta:
        constraints = [models.UniqueConstraint(fields=["series", "level", "chunk"], name="one_rollup_per_chunk")]

    def __str__(self) -> str:
        return f"series {self.series_id} level {self.level} chunk {self.chunk}"

    def as_aggregate(self) -> Aggregate:
        return Aggregate(self.chunk, *(getattr(self, name) for name in self.AGGREGATE_FIELDS))


class Resolution(TextChoices):
    """How an alert closed."""

    CLEARED = "cleared", "Cleared"  # its condition cleared (the rule stopped firing; a hung run moved or stopped)
    RESOLVED = "resolved", "Resolved by hand"
    MUTED = "muted", "Muted"  # its rule was muted on its run
    RUN_ENDED = "run_ended", "Closed when the run ended"


class Alert(models.Model):
    """Something went wrong in a run's training (NaN, a loss spike, a hung run...); open until it clears, someone
    resolves it, its rule is muted on the run, or the run ends."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="alerts")
    rule = models.CharField(max_length=30)
    key = models.CharField(max_length=250, blank=True)
    step = models.BigIntegerField(null=True, blank=True)
    value = models.FloatField(null=True, blank=True)
    message = models.CharField(max_length=500)
    opened_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.CharField(max_length=10, choices=Resolution.choices, blank=True)
    resolved_by = models.CharField(max_length=150, blank=True, help_text="Who resolved or muted it by hand.")
    acknowledged_at = models.DateTimeField(null=True, blank=True, help_text="Seen: someone is on it.")
    acknowledged_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["run", "rule", "key"], condition=models.Q(resolved_at=None),
                                               name="one_open_alert_per_rule")]

    def __str__(self) -> str:
        return f"{self.rule} on run {self.run_id}: {self.message}"


class AlertAction(TextChoices):
    NONE = "none", "None"
    STOP = "stop", "Stop the job"
    RESTART = "restart", "Restart the job from its last checkpoint"


class AlertRule(models.Model):
    """A project's settings of one anomaly rule; a rule without a row runs with its defaults
    (tracking.series.anomaly.DEFAULTS)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="alert_rules", db_index=False)
    rule = models.CharField(max_length=30)
    enabled = models.BooleanField(default=True)
    params = models.JSONField(default=dict, blank=True, help_text="Thresholds overriding the rule's defaults.")
    action = models.CharField(max_length=10, choices=AlertAction.choices, default=AlertAction.NONE)

    class Meta:
        ordering = ["project", "rule"]
        constraints = [models.UniqueConstraint(fields=["project", "rule"], name="one_alert_rule_per_project")]

    def __str__(self) -> str:
        return f"{self.rule} in project {self.project_id}"


class Webhook(models.Model):
    """Where a project's alert openings and resolutions are POSTed, signed with `secret`."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=200)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "id"]

    def __str__(self) -> str:
        return f"webhook {self.pk} of project {self.project_id}"


class Artifact(models.Model):
    """A file a run logged (MLflow's `log_artifact`, a checkpoint, a plot): its bytes are in the artifact store
    (tracking.artifacts.store) under `tracking.artifacts.services.key_of`, its path and size here, so listing a
    run's files and summing a project's bytes for its quota read the database, never the store."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="artifacts", db_index=False)
    # The run's project, kept on the row for the per-project quota's sum.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    path = models.CharField(max_length=1024, help_text="Relative to the run's artifact root, '/'-separated.")
    size = models.BigIntegerField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["run", "path"]
        constraints = [models.UniqueConstraint(fields=["run", "path"], name="one_artifact_per_path")]
        indexes = [models.Index(fields=["project"], name="tracking_artifact_project_idx")]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.path}"


class ArtifactUpload(models.Model):
    """An upload in progress. A multipart one (MLflow's `mpu/create`) takes its parts through the signed part URLs
    it was given, which the store keeps (no row per part: parts arrive in parallel), until `mpu/complete` assembles
    them or `mpu/abort` drops them. A whole file's upload has a row only while the store commits it, holding its
    place in the project's quota (`reserved`)."""

    id = models.CharField(primary_key=True, max_length=32)  # random: part URLs name it
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    path = models.CharField(max_length=1024)
    parts = models.PositiveIntegerField(help_text="How many parts the client announced; 0 for a whole file.")
    store_upload = models.CharField(max_length=1024, blank=True,
                                    help_text="The store's own id of a multipart upload (S3's UploadId).")
    reserved = models.BigIntegerField(default=0, help_text="Bytes counted against the project's quota meanwhile.")
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"upload {self.pk} of run {self.run_id} {self.path}"


class LoggedModelStatus(TextChoices):
    # MLflow 3's names (its LoggedModelStatus enum), so its client reads them unchanged.
    PENDING = "LOGGED_MODEL_PENDING", "Pending"
    READY = "LOGGED_MODEL_READY", "Ready"
    FAILED = "LOGGED_MODEL_UPLOAD_FAILED", "Upload failed"


class LoggedModel(models.Model):
    """A model MLflow 3's client logged (`log_model`, Hugging Face's checkpoints with HF_MLFLOW_LOG_ARTIFACTS): a
    name, params and tags here, its files the artifacts of the run that logged it under `models/<id>/`
    (tracking.mlflow.logged_models), so they count in the project's quota, show on the run page and go with the
    run."""

    id = models.CharField(primary_key=True, max_length=34)  # "m-" and 32 hex digits, as MLflow's ids
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="logged_models")
    name = models.CharField(max_length=250)
    model_type = models.CharField(max_length=250, blank=True)
    status = models.CharField(max_length=30, choices=LoggedModelStatus.choices, default=LoggedModelStatus.PENDING)
    params = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["project", "created_at"]
        indexes = [models.Index(fields=["project", "name"], name="tracking_loggedmodel_name_idx")]

    def __str__(self) -> str:
        return f"logged model {self.pk} of run {self.run_id}"
