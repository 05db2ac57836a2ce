"""MLflow's REST shapes to and from Tidal's experiments and runs: the request fields read with MLflow's error for
a bad one, and the entities rendered as MLflow's JSON (proto3 JSON: NaN and infinities as strings)."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from datetime import UTC, datetime
from typing import overload

from core.digits import is_digits
from tracking.mlflow.errors import invalid
from tracking.models import Experiment, Run
from tracking.series.validate import SURROGATE, has_surrogate, shown_last

DEFAULT_EXPERIMENT_ID = "0"  # the id MLflow's client sends when no experiment is set: the project's "Default"
RUN_NAME_TAG = "mlflow.runName"
NOTE_TAG = "mlflow.note.content"
# Artifacts go through Tidal's copy of MLflow's artifact proxy (tracking.mlflow.artifacts): the client resolves
# `mlflow-artifacts:/<path>` against its tracking URI (`.../mlflow/<project>`), as with `mlflow server
# --serve-artifacts`, so a job's process needs no credentials of the store itself.
ARTIFACT_SCHEME = "mlflow-artifacts:/"
# Fields of MLflow's Metric that Tidal does not store (MLflow 3's links of a metric to a logged model or dataset):
# log-batch reads past them (tracking.series.validate.clean_points).
UNSTORED_METRIC_FIELDS = frozenset({"model_id", "dataset_name", "dataset_digest", "run_id"})
MAX_ID_DIGITS = 18  # beyond a 64-bit primary key: no such object, rather than an overflow in the database
MAX_INT64 = 2**63 - 1
INTEGER = re.compile(r"-?[0-9]{1,30}")  # longer is no int64 either, and converting thousands of digits is slow


@overload
def ms(moment: datetime) -> int: ...
@overload
def ms(moment: None) -> None: ...
def ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


def from_ms(value: int) -> datetime:
    try:
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise invalid(f"{value} is not a time in milliseconds since the epoch.") from None


def number(value: float | None) -> float | str:
    """A metric value in proto3 JSON; None (a summary's last value that was not finite) is NaN."""
    if value is None or math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def latest_value(entry: dict) -> float | str:
    """A run summary's last value in proto3 JSON: a non-finite one as the summary names it (`nonfinite`), "NaN" for
    one kept before summaries named it."""
    last, _ = shown_last(entry)
    return last if isinstance(last, str) else number(last)


def pk_of(value: str) -> int | None:
    """The primary key an MLflow id names, or None when it names nothing Tidal could hold."""
    return int(value) if is_digits(value) and len(value) <= MAX_ID_DIGITS else None


# Request fields. GET endpoints read the query string (all strings), POST ones a JSON object.

def text(body: dict, name: str, *, required: bool = True) -> str:
    value = body.get(name)
    if value is None or value == "":
        if required:
            raise invalid(f"Missing value for required parameter '{name}'.")
        return ""
    if not isinstance(value, str):
        raise invalid(f"Parameter '{name}' must be a string.")
    return checked_text(value, name)


def checked_text(value: str, name: str) -> str:
    if has_surrogate(value):
        raise invalid(f"Parameter '{name}' {SURROGATE}.")
    return value


def integer(body: dict, name: str) -> int | None:
    """An int64 field: a JSON number, or a string of digits (proto3 JSON writes int64 either way)."""
    value = body.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, str) and INTEGER.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"Parameter '{name}' must be an integer.")
    if not -MAX_INT64 - 1 <= value <= MAX_INT64:
        raise invalid(f"Parameter '{name}' is beyond a 64-bit integer.")
    return value


def run_id(body: dict) -> str:
    """MLflow's client sends both `run_id` and its older name `run_uuid`."""
    return text(body, "run_id", required=False) or text(body, "run_uuid")


def strings(body: dict, name: str) -> list[str]:
    value = body.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(f"Parameter '{name}' must be a list of strings.")
    return [checked_text(v, name) for v in value]


def decode_page_token(token: str, name: str = "offset") -> int:
    """Where the page a token names starts: MLflow's own token holds {"offset": n}; a metric's history pages by step
    ({"step": n}). Both are opaque to the client; a number past 64 bits is no position the database can take."""
    if not token:
        return 0
    try:
        position = json.loads(base64.b64decode(token, validate=True))[name]
    except (binascii.Error, ValueError, TypeError, KeyError):
        raise invalid(f"Invalid page token {token[:50]!r}.") from None
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position <= MAX_INT64:
        raise invalid(f"Invalid page token {token[:50]!r}.")
    return position


def encode_page_token(position: int, name: str = "offset") -> str:
    return base64.b64encode(json.dumps({name: position}).encode()).decode()


# Entities.

def experiment(exp: Experiment) -> dict:
    created = ms(exp.created_at)
    return {"experiment_id": str(exp.pk), "name": exp.name, "artifact_location": f"{ARTIFACT_SCHEME}{exp.pk}",
            "lifecycle_stage": "active", "creation_time": created, "last_update_time": created,
            "tags": [{"key": NOTE_TAG, "value": exp.description}] if exp.description else []}


def artifact_uri(run: Run) -> str:
    return f"{ARTIFACT_SCHEME}{run.experiment_id}/{run.pk}/artifacts"


def run_info(run: Run) -> dict:
    info = {"run_id": str(run.pk), "run_uuid": str(run.pk), "run_name": run.name,
            "experiment_id": str(run.experiment_id), "user_id": run.user_name, "status": run.status,
            "start_time": ms(run.started_at), "artifact_uri": artifact_uri(run),
            "lifecycle_stage": "deleted" if run.is_deleted else "active"}
    if run.ended_at is not None:
        info["end_time"] = ms(run.ended_at)
    return info


def run(run: Run) -> dict:
    """A run with its latest metrics, read from the run's summary (the runs table's figures: no points read)."""
    started = ms(run.started_at)
    metrics = [{"key": key, "value": latest_value(entry), "step": max(entry.get("step", 0), 0),
                "timestamp": entry.get("ts", started)} for key, entry in sorted(run.summary.items())]
    tags = {**run.tags, RUN_NAME_TAG: run.name, **({NOTE_TAG: run.note} if run.note else {})}
    return {"info": run_info(run),
            "data": {"metrics": metrics, "params": _pairs(run.params), "tags": _pairs(tags)},
            "inputs": {}}


def _pairs(values: dict[str, str]) -> list[dict]:
    return [{"key": key, "value": value} for key, value in sorted(values.items())]


def history_point(key: str, step: int, timestamp: int, value: float) -> dict:
    return {"key": key, "value": number(value), "step": step, "timestamp": timestamp}
