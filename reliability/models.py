"""Failure diagnosis: one diagnosis per attempt that ended other than succeeded, the hardware faults it names per
node (what quarantine counts), the patterns staff add to the built-in rules, and each running attempt's progress
(what hang detection compares the clock with)."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from clusters.models import Node
from core.choices import TextChoices
from jobs.failures import CAUSES
from jobs.models import Attempt, Job
from reliability import rules
from tenancy.models import Project

CAUSE_CHOICES = [(cause, cause) for cause in CAUSES]


class Source(TextChoices):
    LOG = rules.LOG, "Log line"
    REASON = rules.REASON, "Termination reason"
    EXIT_CODE = rules.EXIT_CODE, "Exit code"
    XID = rules.XID, "GPU Xid event"
    NODE_CONDITION = rules.NODE_CONDITION, "Node condition"
    K8S_EVENT = rules.K8S_EVENT, "Kubernetes event"
    ALERT = rules.ALERT, "Tracking alert"
    PROGRESS = rules.PROGRESS, "Run progress"
    OUTCOME = rules.OUTCOME, "Attempt outcome"
    CAUSE = rules.CAUSE, "Backend's cause"


class FailurePattern(models.Model):
    """A pattern staff add to the built-in rules (`reliability.rules.BUILTIN`); checked before them, so it wins a
    tie."""

    pattern = models.CharField(max_length=500, help_text="A regular expression (case-insensitive).")
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.LOG)
    cause = models.CharField(max_length=30, choices=CAUSE_CHOICES)
    confidence = models.FloatField(default=0.8, validators=[MinValueValidator(0.01), MaxValueValidator(1.0)])
    action = models.CharField(max_length=30, blank=True, choices=[(key, key) for key in rules.ACTIONS],
                              help_text="Empty: the cause's usual action.")
    quarantine = models.CharField(max_length=5, blank=True, choices=[("", "no"), (rules.QUARANTINE_NOW, "at once"),
                                                                     (rules.QUARANTINE_COUNT, "counted")])
    context = models.CharField(max_length=500, blank=True, help_text="A log pattern only: a regular expression one "
                               "of the 5 lines before the match must match.")
    description = models.CharField(max_length=300, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.source}: {self.pattern[:60]} -> {self.cause}"

    def as_rule(self) -> rules.Rule:
        return rules.Rule(self.pattern, self.source, self.cause, self.confidence, self.action,
                          f"pattern-{self.pk}", self.quarantine, self.context)


class Diagnosis(models.Model):
    """Why one attempt ended other than succeeded: the cause class, how sure, the evidence, the recommended action,
    and what the failure cost (device-seconds of the attempt and of the work lost since its last checkpoint)."""

    attempt = models.OneToOneField(Attempt, on_delete=models.CASCADE, related_name="diagnosis")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="diagnoses")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="diagnoses")
    cluster = models.CharField(max_length=100, blank=True)
    outcome = models.CharField(max_length=10)
    cause = models.CharField(max_length=30, choices=CAUSE_CHOICES)
    kind = models.CharField(max_length=10, help_text="config, user, mixed, infra or hardware (jobs.failures).")
    confidence = models.FloatField()
    summary = models.CharField(max_length=500)
    action = models.CharField(max_length=30)
    evidence = models.JSONField(default=list)
    nodes = models.JSONField(default=list, help_text="Nodes the evidence names.")
    quarantined = models.JSONField(default=list, blank=True, help_text="Nodes this failure quarantined.")
    devices = models.PositiveIntegerField(default=0)
    ran_seconds = models.FloatField(default=0.0, help_text="From the attempt's start (or admission) to its end.")
    lost_seconds = models.FloatField(default=0.0, help_text="Work lost: from the last checkpoint (or the start).")
    ended_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-ended_at", "-id"]
        indexes = [models.Index(fields=["project", "ended_at"])]
        verbose_name_plural = "diagnoses"

    def __str__(self) -> str:
        return f"{self.attempt}: {self.cause}"

    @property
    def action_text(self) -> str:
        return rules.ACTIONS.get(self.action, self.action)


class NodeFault(models.Model):
    """A hardware-class failure on a node (from a diagnosis): what quarantine counts, and the per-node report."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="faults")
    diagnosis = models.ForeignKey(Diagnosis, on_delete=models.CASCADE, related_name="faults")
    cause = models.CharField(max_length=30)
    severe = models.BooleanField(default=False, help_text="Quarantines the node at once (Xid 79, 48, ECC).")
    released = models.BooleanField(default=False, help_text="Its node was released since: it counts no more.")
    at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-at"]
        constraints = [models.UniqueConstraint(fields=["node", "diagnosis"], name="one_fault_per_node_diagnosis")]

    def __str__(self) -> str:
        return f"{self.node_id}: {self.cause} at {self.at:%Y-%m-%d %H:%M}"


class Progress(models.Model):
    """A running attempt's training progress as hang detection last saw it: its run's highest step and when it was
    first logged, and the recent time per step (smoothed)."""

    attempt = models.OneToOneField(Attempt, on_delete=models.CASCADE, related_name="progress")
    last_step = models.BigIntegerField(null=True)
    last_step_at = models.DateTimeField(null=True)
    step_seconds = models.FloatField(null=True, help_text="Recent seconds per step.")
    hang_since = models.DateTimeField(null=True, blank=True)
    hang_detected_at = models.DateTimeField(null=True, blank=True)
    hang_message = models.CharField(max_length=300, blank=True)

    def __str__(self) -> str:
        return f"attempt {self.attempt_id}: step {self.last_step}"


class ProjectPolicy(models.Model):
    """A project's reliability choices: restart a hung job from its checkpoint (opt-in)."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="reliability_policy")
    restart_on_hang = models.BooleanField(default=False)

    class Meta:
        ordering = ["project_id"]
        verbose_name_plural = "project policies"

    def __str__(self) -> str:
        return f"{self.project_id}: restart on hang {self.restart_on_hang}"


class QuarantinedNode(Node):
    """The admin console's list of quarantined nodes (a proxy: the rows are clusters' nodes)."""

    class Meta:
        proxy = True
        verbose_name = "quarantined node"
