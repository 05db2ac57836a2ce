"""Who may see and write what through the MLflow paths, and the reads behind them.

The project in the URL is the tenant. A user (token or session) must be a member of it: viewers read, members and
above write; a project they may not see and a run or experiment of another project are the same
RESOURCE_DOES_NOT_EXIST, so nothing of another tenant is revealed. A run token sees its project only through its
own run: it reads and writes that run and reads its experiment, and is refused everything else."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, QuerySet
from rest_framework.request import Request

from tenancy.models import ROLE_RANK, Project, Role
from tenancy.selectors import User, project_for_user, role_in_project
from tracking import selectors
from tracking.auth import check_run_writer, run_credential
from tracking.mlflow.errors import denied, not_found
from tracking.mlflow.translate import DEFAULT_EXPERIMENT_ID, pk_of
from tracking.models import Experiment, Run, Series
from tracking.points import latest, read_blocks
from tracking.services import DEFAULT_EXPERIMENT


@dataclass(frozen=True)
class Scope:
    """What the caller may do in the URL's project."""

    project: Project
    token_run: Run | None  # set for a run token: the one run it may touch
    user: User  # anonymous for a run token
    role: str | None  # the user's role in the project; None for a run token

    @property
    def is_member(self) -> bool:
        return self.role is not None and ROLE_RANK[self.role] >= ROLE_RANK[Role.MEMBER]


def scope_of(request: Request, slug: str) -> Scope:
    credential = run_credential(request)
    if credential is not None:
        run = selectors.run_of_token(credential)
        if run is None or run.project.slug != slug:
            raise not_found(f"No project {slug!r}.")
        return Scope(run.project, run, request.user, None)
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


def metric_history(run: Run, key: str) -> list[tuple[int, int, float]]:
    """(step, timestamp ms, value) of one metric in step order; of a step logged again by a later attempt (a job
    resumed from a checkpoint), the later value, as Tidal's charts show it."""
    series = Series.objects.filter(run=run, key=key).values_list("id", flat=True)
    steps, timestamps, values = latest(read_blocks(series))
    return list(zip(steps.tolist(), timestamps.tolist(), values.tolist(), strict=True))
