"""Tracking follows the job state machine: inside the transaction of every transition, an admitted job gets its
run (or its run moves to the new attempt), and a job that ended for good ends its run. And every project has its
default experiment from its creation on. `TrackingConfig.ready()` connects both."""

from __future__ import annotations

from collections.abc import Sequence

from jobs import lifecycle
from jobs.states import FINAL, State
from tenancy.models import Project
from tracking import services


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
