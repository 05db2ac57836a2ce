"""Who may see and write what through the MLflow paths, and the reads behind them.

The project in the URL is the tenant. A user (token or session) must be a member of it: viewers read, members and
above write; a project they may not see and a run or experiment of another project are the same
RESOURCE_DOES_NOT_EXIST, so nothing of another tenant is revealed. A run token sees its project only through its
own run: it reads and writes that run and reads its experiment, and is refused everything else."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from django.db.models import Q, QuerySet
from rest_framework.request import Request

from tenancy.models import Project, Role
from tenancy.permissions import role_at_least, role_in_project
from tenancy.selectors import User, project_for_user
from tracking import selectors
from tracking.auth import check_run_writer, run_credential
from tracking.mlflow import translate
from tracking.mlflow.errors import denied, not_found
from tracking.mlflow.translate import DEFAULT_EXPERIMENT_ID, pk_of
from tracking.models import Experiment, Run, Series
from tracking.points import Block, latest, page_blocks
from tracking.services import DEFAULT_EXPERIMENT


@dataclass(frozen=True)
class Scope:
    """What the caller may do in the URL's project."""

    project: Project
    token_run: Run | None  # set for a run token: the one run it may touch
    user: User  # anonymous for a run token
    role: str | None  # the user's role in the project; None for a run token
    token_attempt: int | None = None  # a run token's attempt: whose points it logs

    @property
    def is_member(self) -> bool:
        return role_at_least(self.role, Role.MEMBER)


def scope_of(request: Request, slug: str) -> Scope:
    credential = run_credential(request)
    if credential is not None:
        if credential.run.project.slug != slug:
            raise not_found(f"No project {slug!r}.")
        return Scope(credential.run.project, credential.run, request.user, None, token_attempt=credential.attempt)
    project = project_for_user(request.user, slug)
    if project is None:
        raise not_found(f"No project {slug!r}.")
    return Scope(project, None, request.user, role_in_project(request.user, project))


def require_creator(scope: Scope, what: str) -> None:
    """Creating experiments and runs is for members and above; a run token has its run already."""
    if scope.token_run is not None:
        raise denied(f"A run token cannot create {what}; it logs only to its own run.")
    if not scope.is_member:
        raise denied(f"Creating {what} needs the member role in project {scope.project.slug}.")


def run_in(scope: Scope, run_id: str) -> Run:
    if scope.token_run is not None:
        # Answered before any lookup, so it tells nothing about the run asked for.
        if run_id != str(scope.token_run.pk):
            raise denied("A run token reads and writes only its own run.")
        return scope.token_run
    pk = pk_of(run_id)
    run = None if pk is None else scope.project.runs.select_related("experiment").filter(pk=pk).first()
    if run is None:
        raise not_found(f"Run with id={run_id[:50]} not found.")
    return run


def writable_run(scope: Scope, run_id: str) -> Run:
    """The run if the caller may write to it: its own run token, or a user as tracking.auth.check_run_writer says."""
    run = run_in(scope, run_id)
    if scope.token_run is None:
        check_run_writer(run, scope.user, scope.role)
    return run


def run_to_write(scope: Scope, run_id: str) -> tuple[int, Callable[[Run | None], None]]:
    """writable_run's answers for a write that reads the run itself (services.run_log_batch, under its lock): the
    run's primary key, and the check of the row it reads. Nothing is read here; a run token's other runs, and ids
    that name no run, are refused as run_in refuses them."""
    if scope.token_run is not None:
        run_in(scope, run_id)  # refuses any other run before any lookup
    pk = pk_of(run_id)
    if pk is None:
        raise not_found(f"Run with id={run_id[:50]} not found.")

    def check(run: Run | None) -> None:
        if run is None or run.project_id != scope.project.pk:
            raise not_found(f"Run with id={run_id[:50]} not found.")
        if scope.token_run is None:
            check_run_writer(run, scope.user, scope.role)

    return pk, check


def _experiments(scope: Scope) -> QuerySet[Experiment]:
    found = scope.project.experiments.all()
    return found if scope.token_run is None else found.filter(pk=scope.token_run.experiment_id)


def experiment_in(scope: Scope, experiment_id: str) -> Experiment:
    if experiment_id == DEFAULT_EXPERIMENT_ID:
        found = _experiments(scope).filter(name=DEFAULT_EXPERIMENT).first()
    else:
        pk = pk_of(experiment_id)
        found = None if pk is None else _experiments(scope).filter(pk=pk).first()
    if found is None:
        raise not_found(f"No experiment with id={experiment_id[:50]}.")
    return found


def experiment_named(scope: Scope, name: str) -> Experiment:
    found = _experiments(scope).filter(name=name).first()
    if found is None:
        raise not_found(f"No experiment named {name[:200]!r}.")
    return found


def runs_of(scope: Scope, experiment_ids: list[str]) -> QuerySet[Run]:
    """The runs a search may return: of these experiments (all of the project's when none are named)."""
    runs = scope.project.runs.select_related("experiment")
    if scope.token_run is not None:
        runs = runs.filter(pk=scope.token_run.pk)
    if experiment_ids:
        named = Q(experiment_id__in={pk_of(e) for e in experiment_ids} - {None})
        if DEFAULT_EXPERIMENT_ID in experiment_ids:
            named |= Q(experiment__name=DEFAULT_EXPERIMENT)
        runs = runs.filter(named)
    return runs


HistoryPoint = tuple[int, int, float]  # step, timestamp (ms), value


def metric_history_page(run: Run, key: str, first_step: int, size: int) -> tuple[list[HistoryPoint], int | None]:
    """Up to `size` points of one metric from `first_step` on, in step order, and the step the next page starts at
    (None after the last). Of a step logged again by a later attempt (a job resumed from a checkpoint), the later
    value, as Tidal's charts show it.

    Reads the blocks the page spans, not the series: each attempt's next `size + 1` points at most, and once one
    attempt alone holds that many, the others only up to the step where it did (no later step can be on the
    page)."""
    series_id = Series.objects.filter(run=run, key=key).values_list("id", flat=True).first()
    if series_id is None:
        return [], None
    blocks: list[Block] = []
    bound = None  # the (size + 1)-th step from first_step of some attempt: the page ends before it
    for attempt in sorted(map(int, run.attempt_starts)):  # ingestion notes every attempt that logged a point
        found = page_blocks(series_id, attempt, first_step, size + 1, bound)
        blocks += found
        steps = np.concatenate([block.steps for block in found]) if found else np.empty(0, dtype=np.int64)
        steps = steps[steps >= first_step]
        if bound is not None:
            steps = steps[steps <= bound]
        if len(steps) > size:
            bound = int(steps[size])
    steps, timestamps, values = latest(blocks, first_step, bound)
    page = list(zip(steps[:size].tolist(), timestamps[:size].tolist(), values[:size].tolist(), strict=True))
    return page, int(steps[size]) if len(steps) > size else None


def runs_in(scope: Scope, run_ids: list[str]) -> list[Run]:
    """The runs named, in that order; RESOURCE_DOES_NOT_EXIST unless the caller may read every one."""
    if scope.token_run is not None:
        return [run_in(scope, run_id) for run_id in run_ids]
    found = {str(run.pk): run for run in scope.project.runs.filter(pk__in={pk_of(r) for r in run_ids} - {None})}
    missing = [run_id for run_id in run_ids if run_id not in found]
    if missing:
        raise not_found(f"Run with id={missing[0][:50]} not found.")
    return [found[run_id] for run_id in run_ids]


def sampled_history(run: Run, key: str, max_points: int, min_step: int | None,
                    max_step: int | None) -> list[HistoryPoint]:
    """At most `max_points` points of one metric across the step range, keeping each bucket's extremes and its NaN
    and infinities (Tidal's downsampling, tracking.series.downsample), with their timestamps: what MLflow's UI
    draws. With one point, MLflow's answer: the last."""
    if max_points == 1 and min_step is None and key in run.summary:
        step = run.summary[key]["step"]
        sampled = selectors.full_series(run, key, min_step=step, max_step=step)
    else:
        found = selectors.series(run, key, max_points=max(2, max_points), min_step=min_step, max_step=max_step)
        sampled = sorted(found.points + found.markers)
        if max_points == 1:  # within a step range: the latest of its extremes
            sampled = sampled[-1:]
    times = selectors.step_times(run, key, [step for step, _ in sampled])
    started = translate.ms(run.started_at)
    return [(step, times.get(step, started), value) for step, value in sampled]
