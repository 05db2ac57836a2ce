"""The MLflow endpoints: each a small function of (request, scope, body) returning MLflow's response body.

`MlflowEndpoint` gives every one of them Tidal's tracking authentication (a run token, a user's token or session),
the attempt throttle (a job's process has its own allowance: jobs.auth.AttemptThrottle; logging has its own:
tracking.auth.LoggingThrottle), the URL project's scope, and MLflow's error shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.parsers import JSONParser
from jobs.auth import AUTHENTICATION_CLASSES, AttemptThrottle, UserOrAttempt
from tracking import services
from tracking.auth import LoggingThrottle
from tracking.bodies import BatchJSONParser, body_of
from tracking.mlflow import errors, search, translate
from tracking.mlflow.errors import denied, invalid, not_found
from tracking.mlflow.selectors import (
    Scope,
    experiment_in,
    experiment_named,
    metric_history_page,
    require_creator,
    run_in,
    run_to_write,
    runs_in,
    runs_of,
    sampled_history,
    scope_of,
    writable_run,
)
from tracking.mlflow.translate import DEFAULT_EXPERIMENT_ID, integer, run_id, strings, text
from tracking.models import Run

Handler = Callable[[Request, Scope, dict], dict]
SEARCH_MAX_RESULTS = 50_000  # MLflow's own limit for runs/search
SEARCH_DEFAULT_RESULTS = 1_000
HISTORY_PAGE = 25_000  # MLflow's GET_METRIC_HISTORY_MAX_RESULTS: the page its client asks get-history for
BULK_MAX_RUNS = 100  # MLflow's limits for get-history-bulk-interval
BULK_MAX_RESULTS = 2_500
# runs/search's run_view_type (names, or the enum's numbers as proto3 JSON may send them): whether runs without a
# deletion are wanted (None: all).
VIEW_TYPES: dict[object, bool | None] = {"ACTIVE_ONLY": True, 1: True, "DELETED_ONLY": False, 2: False,
                                         "ALL": None, 3: None}


class MlflowEndpoint(APIView):
    schema = None  # MLflow's own API, as its client calls it (docs/mlflow.md), not part of Tidal's schema
    authentication_classes = AUTHENTICATION_CLASSES
    permission_classes = [UserOrAttempt]
    throttle_classes = [AttemptThrottle]
    parser_classes = [JSONParser]
    renderer_classes = [JSONRenderer]

    def get_exception_handler(self) -> Callable:
        return errors.exception_handler


class AnsweringEndpoint(MlflowEndpoint):
    """An endpoint whose answer is a Handler of its request's fields: the query string's (GET, DELETE) or the JSON
    body's, and those in its path (a logged model's id), as MLflow's server reads them."""

    answers: dict[str, Handler] = {}  # by HTTP method: set per URL by as_view(answers=...)

    def get(self, request: Request, project: str, **fields: str) -> Response:
        return self._answered(request, project, request.query_params.dict(), fields)

    def post(self, request: Request, project: str, **fields: str) -> Response:
        body = body_of(request)
        if not isinstance(body, dict):
            raise invalid("The request body must be a JSON object.")
        return self._answered(request, project, body, fields)

    patch = post
    delete = get  # MLflow's client sends a DELETE's fields in its path and query string

    def _answered(self, request: Request, project: str, body: dict, fields: dict[str, str]) -> Response:
        answer = self.answers.get(request.method or "")
        if answer is None:
            raise ImproperlyConfigured(f"{type(self).__name__}.as_view() has no answer for {request.method}")
        return Response(answer(request, scope_of(request, project), {**body, **fields}))


def endpoint(answer: Handler, method: str, *, logs: bool = False) -> Callable:
    """The view of one endpoint; `logs`: it writes points, params or tags, counted at the tracking rate, its body
    read as Tidal's own ingestion endpoint reads one (orjson, the depth check passing over the points: a third of
    the parsing's CPU on a 1,000-point batch), with the same answers to what orjson reads otherwise."""
    return endpoint_by_method({method: answer}, logs=logs)


def endpoint_by_method(answers: dict[str, Handler], *, logs: bool = False) -> Callable:
    """The view of a path served for several methods (a logged model: GET reads it, PATCH finalizes it)."""
    return AnsweringEndpoint.as_view(answers=answers, http_method_names=[*(m.lower() for m in answers), "options"],
                                     throttle_classes=[LoggingThrottle if logs else AttemptThrottle],
                                     parser_classes=[BatchJSONParser if logs else JSONParser])


@csrf_exempt  # it reads nothing and changes nothing: the client's POSTs must get this answer, not a CSRF page
def unknown_endpoint(request: HttpRequest, project: str, rest: str) -> JsonResponse:
    """Endpoints Tidal does not serve (datasets, traces, deletion...): MLflow's answer for them."""
    message = f"Tidal does not serve MLflow's {rest[:100]!r} endpoint; see docs/mlflow.md for those it does."
    return JsonResponse(errors.body("ENDPOINT_NOT_FOUND", message), status=404)


# Experiments

def experiments_get_by_name(request: Request, scope: Scope, body: dict) -> dict:
    return {"experiment": translate.experiment(experiment_named(scope, text(body, "experiment_name")))}


def experiments_get(request: Request, scope: Scope, body: dict) -> dict:
    return {"experiment": translate.experiment(experiment_in(scope, text(body, "experiment_id")))}


def experiments_create(request: Request, scope: Scope, body: dict) -> dict:
    """`artifact_location` and experiment tags are accepted and not kept (Tidal stores no artifacts)."""
    require_creator(scope, "experiments")
    name = text(body, "name")
    if len(name) > 200:
        raise invalid(f"An experiment name is at most 200 characters; this one has {len(name)}.")
    created = services.experiment_create(project=scope.project, name=name)
    return {"experiment_id": str(created.pk)}


# Runs

def runs_create(request: Request, scope: Scope, body: dict) -> dict:
    require_creator(scope, "runs")
    experiment_id = text(body, "experiment_id", required=False) or DEFAULT_EXPERIMENT_ID
    if experiment_id == DEFAULT_EXPERIMENT_ID:
        experiment = services.experiment_get_or_create(project=scope.project, name=services.DEFAULT_EXPERIMENT)
    else:
        experiment = experiment_in(scope, experiment_id)
    tags = body.get("tags") or []
    name = text(body, "run_name", required=False) or _tag(tags, translate.RUN_NAME_TAG)
    start = integer(body, "start_time")
    run = services.run_create(project=scope.project, experiment=experiment, name=name, user=request.user,
                              tags=tags, started_at=translate.from_ms(start) if start is not None else None)
    return {"run": translate.run(run)}


def _tag(tags: object, key: str) -> str:
    if isinstance(tags, list):
        for tag in tags:
            if isinstance(tag, dict) and tag.get("key") == key and isinstance(tag.get("value"), str):
                return tag["value"]
    return ""


def runs_get(request: Request, scope: Scope, body: dict) -> dict:
    return {"run": translate.run(run_in(scope, run_id(body)))}


def runs_update(request: Request, scope: Scope, body: dict) -> dict:
    run = writable_run(scope, run_id(body))
    if scope.token_run is not None and run.is_finished:
        # A run token stops writing when its run finishes; only a new attempt of the job reopens the run.
        raise invalid(f"Run {run.pk} is {run.status.lower()}: its run token changes it no more.")
    end = integer(body, "end_time")
    services.run_update(run=run, name=text(body, "run_name", required=False) or None,
                        status=text(body, "status", required=False) or None,
                        ended_at=translate.from_ms(end) if end is not None else None,
                        by_job=scope.token_run is not None)
    return {"run_info": translate.run_info(run)}


def runs_search(request: Request, scope: Scope, body: dict) -> dict:
    max_results = integer(body, "max_results") or SEARCH_DEFAULT_RESULTS
    if not 0 < max_results <= SEARCH_MAX_RESULTS:
        raise invalid(f"max_results must be between 1 and {SEARCH_MAX_RESULTS}.")
    view_type = body.get("run_view_type") or "ACTIVE_ONLY"
    if isinstance(view_type, bool) or not isinstance(view_type, str | int) or view_type not in VIEW_TYPES:
        raise invalid(f"Invalid run_view_type {str(view_type)[:20]!r}; use ACTIVE_ONLY, DELETED_ONLY or ALL.")
    filter_string = text(body, "filter", required=False)
    runs = runs_of(scope, strings(body, "experiment_ids"))
    if VIEW_TYPES[view_type] is not None:
        runs = runs.filter(deleted_at__isnull=VIEW_TYPES[view_type])
    runs = search.apply_filter(runs, filter_string)
    runs = search.order(runs, strings(body, "order_by"))
    offset = translate.decode_page_token(text(body, "page_token", required=False))
    page = list(runs[offset:offset + max_results + 1])
    found: dict[str, Any] = {"runs": [translate.run(run) for run in page[:max_results]]}
    if len(page) > max_results:
        found["next_page_token"] = translate.encode_page_token(offset + max_results)
    return found


# Logging: every write goes through services.run_log_batch (validated, all or nothing, idempotent).

def runs_log_batch(request: Request, scope: Scope, body: dict) -> dict:
    pk, check = run_to_write(scope, run_id(body))
    services.run_log_batch(run_id=pk, metrics=body.get("metrics"), params=body.get("params"),
                           tags=body.get("tags"), token_attempt=scope.token_attempt,
                           ignored_fields=translate.UNSTORED_METRIC_FIELDS, check=check)
    return {}


def runs_log_metric(request: Request, scope: Scope, body: dict) -> dict:
    pk, check = run_to_write(scope, run_id(body))
    point = {name: body[name] for name in ("key", "value", "step", "timestamp") if name in body}
    services.run_log_batch(run_id=pk, metrics=[point], token_attempt=scope.token_attempt, check=check)
    return {}


def runs_log_parameter(request: Request, scope: Scope, body: dict) -> dict:
    pk, check = run_to_write(scope, run_id(body))
    services.run_log_batch(run_id=pk, params=[{"key": body.get("key"), "value": body.get("value")}], check=check)
    return {}


def runs_set_tag(request: Request, scope: Scope, body: dict) -> dict:
    """A tag; MLflow's note (`mlflow.note.content`) is the run's note and `mlflow.runName` its name. A finished run
    takes tags from a user, as MLflow's does (a run token's writes end with its run)."""
    run = _taggable_run(scope, body)
    key, value = body.get("key"), body.get("value")
    if key == translate.NOTE_TAG:
        services.run_update(run=run, note=value if isinstance(value, str) else "")
    elif key == translate.RUN_NAME_TAG:
        services.run_update(run=run, name=value if isinstance(value, str) else "")
    else:
        services.run_tags_change(run=run, set_tags=[{"key": key, "value": value}])
    return {}


def runs_delete_tag(request: Request, scope: Scope, body: dict) -> dict:
    run = _taggable_run(scope, body)
    key = text(body, "key")
    if key == translate.NOTE_TAG:
        services.run_update(run=run, note="")
    elif key not in run.tags:
        # MLflow's store refuses a tag the run lacks.
        raise not_found(f"No tag with name: {key[:250]} in run with id {run.pk}.")
    else:
        services.run_tags_change(run=run, remove=[key])
    return {}


def _taggable_run(scope: Scope, body: dict) -> Run:
    run = writable_run(scope, run_id(body))
    if scope.token_run is not None and run.is_finished:
        raise invalid(f"Run {run.pk} is {run.status.lower()}: its run token changes it no more.")
    return run


def runs_delete(request: Request, scope: Scope, body: dict) -> dict:
    """Soft delete, MLflow's lifecycle stage; a run token may not delete its own run."""
    services.run_delete(actor=request.user, run=_managed_run(scope, body))
    return {}


def runs_restore(request: Request, scope: Scope, body: dict) -> dict:
    services.run_restore(actor=request.user, run=_managed_run(scope, body))
    return {}


def _managed_run(scope: Scope, body: dict) -> Run:
    if scope.token_run is not None:
        raise denied("A run token cannot delete or restore runs.")
    return writable_run(scope, run_id(body))


# Metrics

def metrics_get_history(request: Request, scope: Scope, body: dict) -> dict:
    """In pages of at most HISTORY_PAGE points, which MLflow's client follows (it asks for pages of that size)."""
    run = run_in(scope, run_id(body))
    key = text(body, "metric_key")
    max_results = integer(body, "max_results")
    if max_results is not None and max_results < 1:
        raise invalid(f"Invalid value {max_results} for parameter 'max_results'; it must be a positive integer.")
    first_step = translate.decode_page_token(text(body, "page_token", required=False), "step")
    points, next_step = metric_history_page(run, key, first_step, min(max_results or HISTORY_PAGE, HISTORY_PAGE))
    found: dict[str, Any] = {"metrics": [translate.history_point(key, *point) for point in points]}
    if next_step is not None:
        found["next_page_token"] = translate.encode_page_token(next_step, "step")
    return found


def metrics_get_history_bulk_interval(request: Request, scope: Scope, body: dict) -> dict:
    """MLflow's UI reads a metric of several runs sampled across a step range: at most `max_results` points a run
    (Tidal's downsampling, which keeps every bucket's extremes, NaN and infinities)."""
    run_ids = request.query_params.getlist("run_ids")
    if not 1 <= len(run_ids) <= BULK_MAX_RUNS:
        raise invalid(f"GetMetricHistoryBulkInterval takes 1 to {BULK_MAX_RUNS} run_ids; got {len(run_ids)}.")
    key = text(body, "metric_key")
    max_results = integer(body, "max_results")
    max_results = BULK_MAX_RESULTS if max_results is None else max_results
    if not 1 <= max_results <= BULK_MAX_RESULTS:
        raise invalid(f"max_results must be between 1 and {BULK_MAX_RESULTS}.")
    start, end = integer(body, "start_step"), integer(body, "end_step")
    if (start is None) != (end is None):
        raise invalid("start_step and end_step are given together or not at all.")
    if start is not None and end is not None and start > end:
        raise invalid(f"end_step must be at least start_step; got start_step={start} and end_step={end}.")
    metrics = []
    for run in runs_in(scope, [translate.checked_text(r, "run_ids") for r in run_ids]):
        metrics += [{**translate.history_point(key, *point), "run_id": str(run.pk)}
                    for point in sampled_history(run, key, max_results, start, end)]
    return {"metrics": metrics}

