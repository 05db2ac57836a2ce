"""Tracking follows the job state machine: inside the transaction of every transition, an admitted job gets its
run (or its run moves to the new attempt), and a job that ended for good ends its run."""

from __future__ import annotations

from jobs import lifecycle
from jobs.states import FINAL, State
from tracking import services


@lifecycle.on_change
def follow_jobs(changes: list[lifecycle.Change]) -> None:
    admitted = {c.job_id: c.attempt for c in changes if c.target == State.ADMITTED}
    if admitted:
        services.runs_for_admitted_jobs(admitted, admitted, changes[0].at)
    finished = {c.job_id: c.target for c in changes if c.target in FINAL}
    if finished:
        services.runs_for_finished_jobs(finished, changes[0].at)
