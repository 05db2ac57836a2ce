"""Tracking follows the job state machine: inside the transaction of every transition, an admitted job gets its
run (or its run moves to the new attempt), and a job that ended for good ends its run. And every project has its
default experiment from its creation on; and a deleted run's artifact files leave the store. `TrackingConfig.ready()`
connects them."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from jobs import lifecycle
from jobs.states import FINAL, State
from tenancy.models import Project
from tracking import services
from tracking.artifacts import services as artifact_services
from tracking.models import Run


# Connected to jobs.lifecycle.on_change in TrackingConfig.ready().
def follow_jobs(changes: Sequence[lifecycle.Change]) -> None:
    admitted = {c.job_id: c.attempt for c in changes if c.target == State.ADMITTED}
    if admitted:
        services.runs_for_admitted_jobs(admitted, admitted, changes[0].at)
    finished = {c.job_id: c.target for c in changes if c.target in FINAL}
    if finished:
        services.runs_for_finished_jobs(finished, changes[0].at)


# Connected to post_save of Project in TrackingConfig.ready().
def default_experiment(sender: type, instance: Project, created: bool, raw: bool = False, **kwargs: object) -> None:
    """MLflow's experiment 0, which its client uses when none is set, exists before a run first uses it."""
    if created and not raw:
        services.experiment_get_or_create(project=instance, name=services.DEFAULT_EXPERIMENT)


# Connected to post_delete of Run in TrackingConfig.ready() (a run deleted itself, or with its project).
def forget_artifacts(sender: type, instance: Run, **kwargs: object) -> None:
    """Once the deletion committed (a rolled-back one keeps its files), the run's files leave the store."""
    run_id, project_id = instance.pk, instance.project_id
    transaction.on_commit(lambda: artifact_services.run_files_forget(run_id, project_id))
