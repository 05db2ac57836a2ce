"""Replay runs started through the API, the admin what-if page or (not stored) the management command.

A run's inputs are frozen when it is created (uploaded files as sent, the `current` cluster and quotas as JSON)
under `<REPLAY_DIR>/<id>/input/`; its outputs (summary.csv/.json, jobs_<policy>.csv, PNG charts, report.html)
land in `<REPLAY_DIR>/<id>/out/`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.choices import TextChoices


class RunStatus(TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class RunKind(TextChoices):
    REPLAY = "replay", "Replay (API)"
    WHATIF = "whatif", "What-if (admin)"


class ReplayRun(models.Model):
    kind = models.CharField(max_length=10, choices=RunKind.choices, default=RunKind.REPLAY)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                   related_name="replay_runs")
    created_by_name = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    # Inputs.
    trace_source = models.CharField(max_length=10, default="upload", help_text="upload or history")
    trace_name = models.CharField(max_length=200, blank=True, help_text="The uploaded file's name.")
    days = models.PositiveIntegerField(null=True, blank=True, help_text="history: the last N days of real jobs.")
    cluster_source = models.CharField(max_length=10, default="current", help_text="current or upload")
    quotas_source = models.CharField(max_length=10, default="current", help_text="current or upload")
    policy = models.CharField(max_length=40, default="production")
    compare = models.JSONField(default=list, blank=True)
    skip_invalid = models.BooleanField(default=False)
    options = models.JSONField(default=dict, blank=True, help_text="Engine options, e.g. priority values.")
    change = models.JSONField(default=dict, blank=True, help_text="What-if: the proposed change.")
    jobs = models.PositiveIntegerField(default=0, help_text="Jobs in the trace after validation.")
    skipped = models.JSONField(default=dict, blank=True, help_text="Rows skipped by reason (skip_invalid).")
    history = models.JSONField(default=dict, blank=True, help_text="history: jobs taken (finished, running, "
                               "waiting) and left out, by reason.")

    # Progress and results.
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True)
    message = models.TextField(blank=True)
    progress = models.FloatField(default=0.0, help_text="0 to 1 over all policies of the run.")
    eta_seconds = models.FloatField(null=True, blank=True)
    summary = models.JSONField(default=list, blank=True, help_text="summarize() of each replayed policy.")
    comparison = models.JSONField(default=list, blank=True, help_text="compare(first, other) for each other.")
    files = models.JSONField(default=list, blank=True, help_text="Names of the output files.")

    # What-if: "Apply this change".
    applied_at = models.DateTimeField(null=True, blank=True)
    applied_by_name = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"replay #{self.pk} {self.policy} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in (RunStatus.SUCCEEDED, RunStatus.FAILED)


class WhatIf(ReplayRun):
    """The admin index entry of the what-if page (a proxy: no table of its own)."""

    class Meta:
        proxy = True
        verbose_name = "what-if analysis"
        verbose_name_plural = "what-if analyses"
