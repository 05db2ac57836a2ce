"""MLflow 3's logged models, as its client calls them for `log_model` (`mlflow.pyfunc.log_model`, Hugging Face's
checkpoints with HF_MLFLOW_LOG_ARTIFACTS=1): create, get, search, finalize, params and tags, each model's files
listed, and `runs/outputs`, which links a model to its run.

A logged model belongs to the run that logged it (`source_run_id`, which Tidal requires: a model's files are kept
as that run's artifacts under `models/<model id>/`, in the run's quota and purged with it). Its artifact URI,
`mlflow-artifacts:/<experiment>/models/<model id>/artifacts`, leads the client to the artifact proxy
(tracking.mlflow.artifacts.locate), which stores the files there. Tenancy is its run's: a model is seen by whoever
sees its run and written by whoever may write to its run; a run token sees its own run's models only, and any other
model (another project's included) is RESOURCE_DOES_NOT_EXIST."""

from __future__ import annotations

import re
import secrets
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from rest_framework.request import Request

from core.digits import is_digits
from core.serializers import has_control_character
from tracking.artifacts import paths
from tracking.artifacts import selectors as artifact_selectors
from tracking.mlflow.errors import invalid, not_found
from tracking.mlflow.selectors import Scope, experiment_in, runs_of, writable_run
from tracking.mlflow.translate import ARTIFACT_SCHEME, decode_page_token, encode_page_token, integer, ms, strings, text
from tracking.models import LoggedModel, LoggedModelStatus, Run
from tracking.series.validate import (
    MAX_KEY,
    MAX_PARAM_VALUE,
    MAX_PARAMS,
    MAX_TAG_VALUE,
    MAX_TAGS,
    clean_pairs,
)

MODEL_ID = re.compile(r"m-[0-9a-f]{32}")
FOLDER = "models"  # a run's artifacts folder holding its logged models' files, one folder per model id
SEARCH_MAX_RESULTS = 1_000
SEARCH_DEFAULT_RESULTS = 100  # MLflow's default page of search_logged_models
# The attributes a search filter may compare (`=` or `!=` with a quoted string, clauses joined by AND): the client's
# own lookups (a run's model by name: `name = '<name>'`) and their like.
FILTER_FIELDS = {"name": "name", "source_run_id": "run_id", "model_id": "pk", "status": "status",
                 "model_type": "model_type"}
CLAUSE = re.compile(r"\s*(?:attributes\.)?(?P<field>\w+)\s*(?P<op>!=|=)\s*'(?P<value>(?:[^'\\]|\\.)*)'\s*",
                    re.IGNORECASE)
AND = re.compile(r"AND\s", re.IGNORECASE)
ORDER_FIELDS = {"name": "name", "creation_timestamp": "created_at", "last_updated_timestamp": "updated_at"}
STATUSES = {"LOGGED_MODEL_PENDING": LoggedModelStatus.PENDING, 1: LoggedModelStatus.PENDING,
            "LOGGED_MODEL_READY": LoggedModelStatus.READY, 2: LoggedModelStatus.READY,
            "LOGGED_MODEL_UPLOAD_FAILED": LoggedModelStatus.FAILED, 3: LoggedModelStatus.FAILED}


def folder_of(model: LoggedModel) -> str:
    """Where the model's files are in its run's artifacts."""
    return f"{FOLDER}/{model.pk}"


def render(model: LoggedModel) -> dict:
    """MLflow's LoggedModel (proto3 JSON). It keeps no metrics of its own: they are its run's."""
    experiment = model.run.experiment_id
    info = {"model_id": model.pk, "experiment_id": str(experiment), "name": model.name,
            "creation_timestamp_ms": ms(model.created_at), "last_updated_timestamp_ms": ms(model.updated_at),
            "artifact_uri": f"{ARTIFACT_SCHEME}{experiment}/{FOLDER}/{model.pk}/artifacts",
            "status": model.status, "model_type": model.model_type, "source_run_id": str(model.run_id),
            "tags": _pairs(model.tags)}
    return {"info": info, "data": {"params": _pairs(model.params), "metrics": []}}


def _pairs(values: dict[str, str]) -> list[dict]:
    return [{"key": key, "value": value} for key, value in sorted(values.items())]


# Reads

def models_of(scope: Scope) -> QuerySet[LoggedModel]:
    """The models the caller may see: the project's, or a run token's run's."""
    found = LoggedModel.objects.filter(project=scope.project).select_related("run")
    return found if scope.token_run is None else found.filter(run=scope.token_run)


def model_in(scope: Scope, model_id: str) -> LoggedModel:
    found = models_of(scope).filter(pk=model_id).first() if MODEL_ID.fullmatch(model_id) else None
    if found is None:
        raise not_found(f"Logged model with id={model_id[:50]!r} not found.")
    return found


def _writable(scope: Scope, model: LoggedModel) -> LoggedModel:
    _check_run_open(scope, writable_run(scope, str(model.run_id)))
    return model


def _check_run_open(scope: Scope, run: Run) -> None:
    """A deleted run takes nothing; a run token's writes stop when its run finishes (as its logging does)."""
    if run.is_deleted:
        raise invalid(f"Run {run.pk} is deleted: restore it before logging a model to it.")
    if scope.token_run is not None and run.is_finished:
        raise invalid(f"Run {run.pk} is {run.status.lower()}: its run token changes it no more.")


# Endpoints: (request, scope, body) -> MLflow's response body, as tracking.mlflow.views'.

def create(request: Request, scope: Scope, body: dict) -> dict:
    run_id = text(body, "source_run_id", required=False)
    if not run_id:
        raise invalid("Parameter 'source_run_id' is required: Tidal keeps a logged model's files with the run that "
                      "logged it (log the model inside mlflow.start_run()).")
    run = writable_run(scope, run_id)
    _check_run_open(scope, run)
    experiment = experiment_in(scope, text(body, "experiment_id"))
    if experiment.pk != run.experiment_id:
        raise invalid(f"Parameter 'experiment_id' is {experiment.pk}; run {run.pk} is of experiment "
                      f"{run.experiment_id}.")
    name = _name(text(body, "name", required=False) or f"model-{secrets.token_hex(4)}")
    model_type = text(body, "model_type", required=False)
    if len(model_type) > MAX_KEY or has_control_character(model_type):
        raise invalid(f"Parameter 'model_type' must be at most {MAX_KEY} characters without control characters.")
    now = timezone.now()
    model = LoggedModel.objects.create(
        id=f"m-{secrets.token_hex(16)}", project=scope.project, run=run, name=name, model_type=model_type,
        params=clean_pairs(body.get("params"), "params", MAX_PARAMS, MAX_PARAM_VALUE),
        tags=clean_pairs(body.get("tags"), "tags", MAX_TAGS, MAX_TAG_VALUE), created_at=now, updated_at=now)
    return {"model": render(model)}


def _name(name: str) -> str:
    if len(name) > MAX_KEY:
        raise invalid(f"Parameter 'name' is {len(name)} characters long; at most {MAX_KEY}.")
    if has_control_character(name):  # a lone surrogate was refused as the field was read (translate.text)
        raise invalid("Parameter 'name' holds a control character.")
    if "/" in name or name in (".", ".."):
        # runs:/<run>/<name> URIs find a model by its name as their first path segment.
        raise invalid(f"Parameter 'name' must not hold '/' nor be '.' or '..'; got {name[:100]!r}.")
    return name


def get(request: Request, scope: Scope, body: dict) -> dict:
    return {"model": render(model_in(scope, text(body, "model_id")))}


def finalize(request: Request, scope: Scope, body: dict) -> dict:
    model = _writable(scope, model_in(scope, text(body, "model_id")))
    status = body.get("status")
    if isinstance(status, bool) or not isinstance(status, str | int) or status not in STATUSES:
        raise invalid(f"Parameter 'status' must be LOGGED_MODEL_READY or LOGGED_MODEL_UPLOAD_FAILED; got "
                      f"{str(status)[:40]!r}.")
    model.status, model.updated_at = STATUSES[status], timezone.now()
    model.save(update_fields=["status", "updated_at"])
    return {"model": render(model)}


def set_tags(request: Request, scope: Scope, body: dict) -> dict:
    model = _writable(scope, model_in(scope, text(body, "model_id")))
    tags = {**model.tags, **clean_pairs(body.get("tags"), "tags", MAX_TAGS, MAX_TAG_VALUE)}
    if len(tags) > MAX_TAGS:
        raise invalid(f"A logged model holds at most {MAX_TAGS} tags.")
    _save(model, tags=tags)
    return {"model": render(model)}


def delete_tag(request: Request, scope: Scope, body: dict) -> dict:
    model = _writable(scope, model_in(scope, text(body, "model_id")))
    key = text(body, "tag_key")
    if key not in model.tags:
        raise not_found(f"No tag with key {key[:MAX_KEY]!r} on logged model {model.pk}.")
    _save(model, tags={k: v for k, v in model.tags.items() if k != key})
    return {}


def log_params(request: Request, scope: Scope, body: dict) -> dict:
    """The params past the first 100, which the client sends after `create`."""
    model = _writable(scope, model_in(scope, text(body, "model_id")))
    params = {**model.params, **clean_pairs(body.get("params"), "params", MAX_PARAMS, MAX_PARAM_VALUE)}
    if len(params) > MAX_PARAMS:
        raise invalid(f"A logged model holds at most {MAX_PARAMS} params.")
    _save(model, params=params)
    return {}


def _save(model: LoggedModel, **values: dict[str, str]) -> None:
    for name, value in values.items():
        setattr(model, name, value)
    model.updated_at = timezone.now()
    model.save(update_fields=[*values, "updated_at"])


def list_artifacts(request: Request, scope: Scope, body: dict) -> dict:
    """A folder of the model's files (`artifact_directory_path`, '' its root), as MLflow's ListLoggedModelArtifacts."""
    model = model_in(scope, text(body, "model_id"))
    try:
        inside = paths.clean(text(body, "artifact_directory_path", required=False), "artifact_directory_path",
                             allow_empty=True)
    except paths.PathError as error:
        raise invalid(str(error)) from None
    root = folder_of(model)
    files: list[dict[str, Any]] = []
    for entry in artifact_selectors.entries(model.run, paths.join(root, inside)):
        shown: dict[str, Any] = {"path": entry.path[len(root) + 1:], "is_dir": entry.is_dir}
        if entry.size is not None:
            shown["file_size"] = entry.size
        files.append(shown)
    return {"root_uri": render(model)["info"]["artifact_uri"], "files": files}


def search(request: Request, scope: Scope, body: dict) -> dict:
    """Models of the named experiments (all the caller sees when none are named), filtered and ordered."""
    experiment_ids = strings(body, "experiment_ids")
    if body.get("datasets"):
        raise invalid("Parameter 'datasets' is not supported: Tidal keeps no metrics of logged models.")
    max_results = integer(body, "max_results")
    max_results = SEARCH_DEFAULT_RESULTS if max_results is None else max_results
    if not 0 < max_results <= SEARCH_MAX_RESULTS:
        raise invalid(f"Parameter 'max_results' must be between 1 and {SEARCH_MAX_RESULTS}.")
    found = models_of(scope)
    if experiment_ids:  # as runs/search: an experiment the caller cannot see matches nothing
        found = found.filter(run__in=runs_of(scope, experiment_ids))
    for field, op, value in _clauses(text(body, "filter", required=False)):
        found = found.exclude(**{field: value}) if op == "!=" else found.filter(**{field: value})
    found = found.order_by(*_order(body.get("order_by")), "-created_at", "pk")
    offset = decode_page_token(text(body, "page_token", required=False))
    page = list(found[offset:offset + max_results + 1])
    answer: dict[str, Any] = {"models": [render(model) for model in page[:max_results]]}
    if len(page) > max_results:
        answer["next_page_token"] = encode_page_token(offset + max_results)
    return answer


def _clauses(filter_string: str) -> list[tuple[str, str, str]]:
    clauses, position = [], 0
    while position < len(filter_string):
        match = CLAUSE.match(filter_string, position)
        field = FILTER_FIELDS.get(match["field"].lower()) if match else None
        if match is None or field is None:
            raise invalid(f"Invalid filter {filter_string[:200]!r} at {filter_string[position:position + 40]!r}: "
                          f"expected <{'|'.join(FILTER_FIELDS)}> = or != '<value>', joined by AND.")
        value = re.sub(r"\\(.)", r"\1", match["value"])
        if field == "run_id" and not is_digits(value):
            value = "-1"  # no run has it: the clause matches nothing, as an unknown id matches nothing
        clauses.append((field, match["op"], value))
        position = match.end()
        if position < len(filter_string):
            joined = AND.match(filter_string, position)
            if joined is None:
                raise invalid(f"Invalid filter {filter_string[:200]!r}: clauses are joined by AND.")
            position = joined.end()
    return clauses


def _order(order_by: object) -> list[str]:
    if order_by in (None, []):
        return []
    if not isinstance(order_by, list) or not all(isinstance(o, dict) for o in order_by):
        raise invalid("Parameter 'order_by' must be a list of {field_name, ascending} objects.")
    terms = []
    for i, term in enumerate(order_by):
        field = ORDER_FIELDS.get(term.get("field_name"))
        if field is None:
            raise invalid(f"Parameter 'order_by[{i}].field_name' must be one of {', '.join(ORDER_FIELDS)}.")
        terms.append(field if term.get("ascending", True) is not False else f"-{field}")
    return terms


def runs_outputs(request: Request, scope: Scope, body: dict) -> dict:
    """`log_model` links the model to its run as an output (at a step): the link Tidal keeps is the model's run, so
    this checks that the run is writable and every model is one of the caller's, and keeps nothing more."""
    run = writable_run(scope, text(body, "run_id"))
    _check_run_open(scope, run)
    models = body.get("models") or []
    if not isinstance(models, list) or not all(isinstance(m, dict) for m in models):
        raise invalid("Parameter 'models' must be a list of {model_id, step} objects.")
    for i, output in enumerate(models):
        model_id = output.get("model_id")
        if not isinstance(model_id, str):
            raise invalid(f"Parameter 'models[{i}].model_id' must be a string.")
        integer(output, "step")
        model_in(scope, model_id)
    return {}
