"""Jobs, their replica groups, their attempts and their event history."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from core.choices import TextChoices
from jobs.states import State
from quotas.models import PriorityClass, ResourceFlavor
from tenancy.models import Project


class Stage(TextChoices):
    PRETRAIN = "pretrain", "Pre-training"
    SFT = "sft", "SFT"
    RL = "rl", "RL"
    EVAL = "eval", "Evaluation"
    DATA = "data", "Data processing"
    OTHER = "other", "Other"


class Launcher(TextChoices):
    PYTORCH = "pytorch", "PyTorch (torchrun, DDP/FSDP)"
    DEEPSPEED = "deepspeed", "DeepSpeed"
    MEGATRON = "megatron", "Megatron"
    RAY = "ray", "Ray"
    COMMAND = "command", "Command"


# Launchers that cannot change a running job's world size, and why: a replica group of their jobs may not be elastic
# (`replicas: {min, max}` with min < max). torchrun (c10d rendezvous), DeepSpeed's elastic agent and Ray worker groups
# restart training at a new world size; these do not.
NOT_RESIZABLE: dict[str, str] = {
    "megatron": "Megatron fixes its tensor and pipeline parallel sizes, and with them its world size, at start",
    "command": "a plain command gets no rendezvous, so its processes cannot agree on a new world size",
}


class Topology(TextChoices):
    NONE = "none", "No constraint"
    PREFER_SAME_RACK = "prefer-same-rack", "Prefer one rack"
    REQUIRE_SAME_RACK = "require-same-rack", "Require one rack"
    REQUIRE_SAME_BLOCK = "require-same-block", "Require one block"


class Job(models.Model):
    # project and flavor lead the composite indexes below, which serve their lookups too: every index is written on
    # every submission and every state change.
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="jobs", db_index=False)
    submitter = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="jobs")
    submitter_name = models.CharField(max_length=150, help_text="Kept when the account is deleted.")
    name = models.CharField(max_length=200)
    stage = models.CharField(max_length=10, choices=Stage.choices, default=Stage.OTHER)
    launcher = models.CharField(max_length=10, choices=Launcher.choices, default=Launcher.PYTORCH)
    image = models.CharField(max_length=500)
    command = models.JSONField(default=list)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    launcher_options = models.JSONField(default=dict, blank=True, help_text="e.g. tensor/pipeline parallel sizes.")
    topology = models.CharField(max_length=20, choices=Topology.choices, default=Topology.NONE)
    priority_class = models.ForeignKey(PriorityClass, on_delete=models.PROTECT, related_name="jobs")
    max_runtime = models.PositiveIntegerField(null=True, blank=True, help_text="Seconds; used for backfill and ETA.")
    min_runtime = models.PositiveIntegerField(default=0, help_text="Seconds before the job may be preempted.")
    retry_limit = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(20)])
    retry_backoff = models.PositiveIntegerField(default=30, help_text="Seconds before the first retry; doubles.")
    permanent_exit_codes = models.JSONField(default=list, blank=True)
    checkpoint_path = models.CharField(max_length=500, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    experiment = models.CharField(max_length=200, blank=True, help_text="Experiment name (tracking comes later).")
    duration = models.PositiveIntegerField(
        null=True, blank=True, help_text="Simulated backend only: seconds the job runs before it succeeds."
    )
    # Elastic jobs (a replica group with min_replicas): the throughput kept per added worker, and the seconds
    # between two resizes (RunningJob.resize_cooldown).
    scaling_efficiency = models.FloatField(default=0.9, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    resize_cooldown = models.PositiveIntegerField(default=300, help_text="Seconds between two resizes.")

    # Derived at submission from the replica groups, for queue filters and the scheduler snapshot; an elastic job's
    # total_devices is its minimum need (what admission needs; a running attempt's own devices say what it holds).
    flavor = models.ForeignKey(ResourceFlavor, on_delete=models.PROTECT, related_name="jobs", db_index=False)
    total_devices = models.PositiveIntegerField(default=0)

    state = models.CharField(max_length=12, choices=State.choices, default=State.QUEUED)
    # The number of the current attempt, or of the next one while the job waits in the queue again.
    attempt = models.PositiveSmallIntegerField(default=1)
    current_attempt = models.ForeignKey(
        "Attempt", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The attempt holding or last holding capacity; none while queued for a new attempt.")
    submitted_at = models.DateTimeField(db_index=True)
    queued_at = models.DateTimeField(help_text="Last time the job entered the queue.")
    finished_at = models.DateTimeField(null=True, blank=True)
    retry_at = models.DateTimeField(null=True, blank=True, help_text="A retrying job re-enters the queue then.")

    # Scheduling explanations of a waiting job, written only by the scheduler loop.
    avoid_nodes = models.JSONField(default=list, blank=True)
    wait_code = models.CharField(max_length=20, blank=True)
    wait_reason = models.CharField(max_length=500, blank=True)
    project_position = models.PositiveIntegerField(null=True, blank=True)
    flavor_position = models.PositiveIntegerField(null=True, blank=True)
    # Its estimated start (with note "no earlier than": a bound) and range (p10-p90; no late end: later than the
    # forecast looked), or in the note why it has none (jobs.scheduling.forecast).
    eta = models.DateTimeField(null=True, blank=True)
    eta_low = models.DateTimeField(null=True, blank=True)
    eta_high = models.DateTimeField(null=True, blank=True)
    eta_note = models.CharField(max_length=40, blank=True)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        # A plain index on state: db_index on a CharField would add a second, LIKE-pattern index nobody queries.
        indexes = [models.Index(fields=["project", "state"]), models.Index(fields=["flavor", "state"]),
                   models.Index(fields=["state"], name="jobs_job_state_idx")]

    def __str__(self) -> str:
        return f"#{self.pk} {self.name}"


class ReplicaGroup(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="groups")
    role = models.CharField(max_length=40)
    replicas = models.PositiveIntegerField(validators=[MinValueValidator(1), MaxValueValidator(1024)])
    devices = models.PositiveIntegerField(validators=[MinValueValidator(0), MaxValueValidator(64)])
    flavor = models.ForeignKey(ResourceFlavor, on_delete=models.PROTECT, related_name="+")
    cpu_millis = models.PositiveIntegerField(default=4000)
    memory_mib = models.PositiveIntegerField(default=16384)
    rdma = models.BooleanField(default=False)
    # Elastic: the group runs on min_replicas..replicas workers (replicas is then its maximum). Null: a rigid gang.
    min_replicas = models.PositiveIntegerField(null=True, blank=True,
                                               validators=[MinValueValidator(1), MaxValueValidator(1024)])

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        size = self.replicas if self.min_replicas is None else f"{self.min_replicas}..{self.replicas}"
        return f"{self.role} x{size} ({self.devices} {self.flavor.name})"

    @property
    def elastic(self) -> bool:
        return self.min_replicas is not None

    @property
    def needed(self) -> int:
        """Replicas admission needs: the minimum of an elastic group, else all of them."""
        return self.replicas if self.min_replicas is None else self.min_replicas


class Outcome(TextChoices):
    """How an attempt ended."""

    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    PREEMPTED = "preempted", "Preempted"
    CANCELLED = "cancelled", "Cancelled"
    LOST = "lost", "Lost"  # its node went away (or its pods vanished with it)


class Attempt(models.Model):
    """One try of a job on a cluster: from its admission (with a placement) until it succeeds, fails, is preempted,
    cancelled or lost. Written only by the state machine (`jobs.lifecycle`)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveSmallIntegerField()
    cluster = models.ForeignKey("clusters.Cluster", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="attempts")
    placement = models.JSONField(default=list, help_text='Per replica: {"role", "index", "node", "devices"}.')
    borrowed = models.PositiveIntegerField(default=0, help_text="Devices above the project's guarantee.")
    tidal_devices = models.PositiveIntegerField(
        default=0, help_text="Devices on capacity a pool lent (placement rows naming a `pool`), now.")
    admitted_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True, help_text="When every replica ran.")
    ended_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True)
    cause = models.CharField(max_length=30, blank=True, help_text="Why a failed or lost attempt ended.")
    reason = models.CharField(max_length=1000, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True, help_text="Replica, node, rack, container reason...")
    checkpoint = models.CharField(max_length=500, blank=True, help_text="The last checkpoint the job reported.")
    checkpoint_step = models.BigIntegerField(null=True, blank=True, help_text="Its step, when the job said.")
    checkpoint_at = models.DateTimeField(null=True, blank=True)
    log_location = models.CharField(max_length=300, blank=True, help_text="Where the live logs are read.")
    logs = models.JSONField(default=dict, blank=True, help_text="Last lines per replica, kept when it ended.")
    # Elastic jobs: how many times the attempt was resized (the version a resize is conditional on, so one decision
    # is never applied twice) and when last (its cooldown counts from then). Its resizes are `resizes`.
    resize_count = models.PositiveIntegerField(default=0)
    resized_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="one_attempt_per_number")]
        # Open attempts per cluster: what a backend observes.
        indexes = [models.Index(fields=["cluster", "ended_at"], name="jobs_attempt_open_idx")]

    def __str__(self) -> str:
        return f"#{self.job_id} attempt {self.number}"

    @property
    def is_open(self) -> bool:
        return self.ended_at is None

    @property
    def devices(self) -> int:
        return sum(int(row["devices"]) for row in self.placement)


class AttemptResize(models.Model):
    """One resize of an elastic job's attempt (a Grow or Shrink of the scheduler applied by the state machine): the
    attempt goes on, with its placement changed. The attempt's replicas over time are its admission's placement, then
    `new_replicas` from each resize's `at` on. Written only by `jobs.lifecycle.resize`."""

    class Kind(TextChoices):
        GROW = "grow", "Grow"
        SHRINK = "shrink", "Shrink"

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="resizes")
    at = models.DateTimeField()
    kind = models.CharField(max_length=6, choices=Kind.choices)
    old_replicas = models.PositiveIntegerField(help_text="Replicas (world size in pods) before.")
    new_replicas = models.PositiveIntegerField()
    old_devices = models.PositiveIntegerField()
    new_devices = models.PositiveIntegerField()
    reason = models.CharField(max_length=1000)
    for_job = models.PositiveIntegerField(null=True, blank=True, help_text="The job a shrink made room for.")
    replicas = models.JSONField(default=list, help_text="The replicas added or removed: {role, index, node, devices}.")

    class Meta:
        ordering = ["attempt", "at", "id"]

    def __str__(self) -> str:
        return f"{self.attempt}: {self.old_replicas} -> {self.new_replicas}"


class JobEvent(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    attempt = models.PositiveSmallIntegerField(null=True, blank=True, help_text="The attempt it concerns.")
    created_at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=20, default="transition", help_text="transition, note")
    from_state = models.CharField(max_length=12, blank=True)
    to_state = models.CharField(max_length=12, blank=True)
    reason = models.CharField(max_length=1000)
    actor_name = models.CharField(max_length=150, help_text="A user, or scheduler / backend / system.")
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.from_state}->{self.to_state} {self.reason}"
