"""Validation of a logged batch: plain data in, clean points or the first problem out (pure)."""

from __future__ import annotations

import math
import unicodedata
from typing import Annotated, Any, NamedTuple

import msgspec

MAX_POINTS = 10_000  # points per batch: ten times MLflow's 1,000 metrics per log-batch
MAX_PARAMS = 1_000
MAX_TAGS = 1_000
MAX_KEY = 250
MAX_PARAM_VALUE = 6_000  # MLflow's limit, so a param logged through either API fits both
MAX_TAG_VALUE = 8_000
MAX_STEP = 2**63 - 1
POINT_FIELDS = frozenset({"key", "value", "step", "timestamp"})
_MISSING = object()
SPECIAL = {"NaN": math.nan, "nan": math.nan, "Infinity": math.inf, "inf": math.inf, "-Infinity": -math.inf,
           "-inf": -math.inf}


class BatchError(ValueError):
    """The batch is refused as a whole; `field` names where (e.g. "metrics[17].value")."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class KeyPoints(NamedTuple):
    """One key's points of a batch, in step order with one point a step: the batch is grouped once, here, and the
    COPY, the summary, the rollups and the anomaly checks all read these lists."""

    steps: list[int]
    timestamps: list[int]  # ms
    values: list[float]


Batch = dict[str, KeyPoints]


class Point(msgspec.Struct, forbid_unknown_fields=True):
    """A point as clean_points takes it in the common case, decoded straight from the body's bytes (tracking.bodies):
    its fields' types and the ranges of its step and timestamp are checked by the decoder, in C. A point that is
    anything else (a missing value, an integral float step, a field MLflow links a metric to a model with...) is
    not decoded so: the body is read the general way, and clean_points judges it, naming the point."""

    key: str
    value: float | str  # a string: "NaN", "Infinity" or "-Infinity", or refused by clean_points
    step: Annotated[int, msgspec.Meta(ge=0, le=MAX_STEP)] = 0
    timestamp: Annotated[int, msgspec.Meta(ge=0, le=MAX_STEP)] | None = None  # ms; None: now


class TypedPoints(list[Point]):
    """A batch's points as decoded Points (tracking.bodies.typed_body), where a body holds lists of dicts."""


def batch_size(batch: Batch) -> int:
    return sum(len(group.steps) for group in batch.values())


def has_surrogate(text: str) -> bool:
    """Whether the string holds half of a UTF-16 surrogate pair (what JSON's "\\ud800" escape decodes to): that is
    no text, and neither PostgreSQL nor SQLite can store or compare it."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


SURROGATE = "contains a lone surrogate (half of a UTF-16 pair), which is not text"


def check_key(key: Any, field: str) -> str:
    if not isinstance(key, str) or not key:
        raise BatchError(field, "must be a non-empty string")
    if len(key) > MAX_KEY:
        raise BatchError(field, f"is {len(key)} characters long; at most {MAX_KEY}")
    if any(unicodedata.category(c) == "Cc" for c in key):
        raise BatchError(field, "contains a control character")
    if has_surrogate(key):
        raise BatchError(field, SURROGATE)
    return key


def check_value(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BatchError(field, "must be a number, or \"NaN\", \"Infinity\", \"-Infinity\"")
    if isinstance(value, str):
        if value not in SPECIAL:
            raise BatchError(field, f"{value[:40]!r} is not a number")
        return SPECIAL[value]
    try:
        return float(value)
    except OverflowError:  # an integer beyond float64
        raise BatchError(field, "is beyond the range of a 64-bit float") from None


def check_int(value: Any, field: str, *, minimum: int = 0, maximum: int = MAX_STEP) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise BatchError(field, "must be an integer")
    if value < minimum:
        raise BatchError(field, f"must be at least {minimum}")
    if value > maximum:
        raise BatchError(field, f"must be at most {maximum}")
    return int(value)


def clean_points(metrics: Any, now_ms: int, field: str = "metrics", ignored: frozenset[str] = frozenset()) -> Batch:
    """Points as {"key", "value", "step" (default 0), "timestamp" (ms, default now)}, grouped by key in step
    order; of two points of one key and step, the later in the batch wins (one row each: an upsert may not touch a
    row twice). Fields in `ignored` are allowed and not kept (MLflow's links of a metric to a logged model): read
    past here rather than copying every point without them first, which cost the MLflow endpoint a tenth of its
    CPU on a 1,000-point batch.

    The common case (a known key, a float value, int step and timestamp in range) is checked inline: this loop
    runs for every point ingested, and a batch repeats a handful of keys thousands of times. Training logs steps in
    increasing order, so a key's points are only sorted when they came otherwise."""
    if metrics is None:
        return {}
    if type(metrics) is TypedPoints:
        return _clean_typed(metrics, now_ms, field)
    if not isinstance(metrics, list):
        raise BatchError(field, "must be a list of points")
    if len(metrics) > MAX_POINTS:
        raise BatchError(field, f"has {len(metrics)} points; at most {MAX_POINTS} per batch")
    batch: Batch = {}  # its keys are the keys of this batch already checked
    unordered: dict[int, KeyPoints] = {}  # the groups whose steps came out of order, by identity
    allowed = POINT_FIELDS | ignored
    for i, raw in enumerate(metrics):
        if type(raw) is not dict:
            raise BatchError(f"{field}[{i}]", "must be an object with key, value, step and timestamp")
        if not raw.keys() <= allowed:
            raise BatchError(f"{field}[{i}].{sorted(raw.keys() - allowed)[0]}", "is not a field of a point")
        key = raw.get("key")
        group = batch.get(key) if type(key) is str else None
        if group is None:
            group = batch[check_key(key, f"{field}[{i}].key")] = KeyPoints([], [], [])
        value = raw.get("value", _MISSING)
        if type(value) is not float:
            if value is _MISSING:
                raise BatchError(f"{field}[{i}].value", "is required")
            value = check_value(value, f"{field}[{i}].value")
        step = raw.get("step", 0)
        if type(step) is not int or not 0 <= step <= MAX_STEP:
            step = check_int(step, f"{field}[{i}].step")
        ts = raw.get("timestamp")
        if ts is None:
            ts = now_ms
        elif type(ts) is not int or not 0 <= ts <= MAX_STEP:
            ts = check_int(ts, f"{field}[{i}].timestamp")
        steps = group.steps
        if steps and step <= steps[-1]:
            unordered[id(group)] = group
        steps.append(step)
        group.timestamps.append(ts)
        group.values.append(value)
    for group in unordered.values():
        _put_in_step_order(group)
    return batch


def _clean_typed(points: TypedPoints, now_ms: int, field: str) -> Batch:
    """clean_points of decoded Points: what their decoding checked (each point an object of known fields, a value,
    a step and a timestamp in range) is not checked again; keys and string values are, the same way, in the same
    order, so a refusal names the same point and says the same."""
    if len(points) > MAX_POINTS:
        raise BatchError(field, f"has {len(points)} points; at most {MAX_POINTS} per batch")
    batch: Batch = {}
    unordered: dict[int, KeyPoints] = {}
    for i, point in enumerate(points):
        group = batch.get(point.key)
        if group is None:
            group = batch[check_key(point.key, f"{field}[{i}].key")] = KeyPoints([], [], [])
        value = point.value
        if type(value) is not float:
            value = check_value(value, f"{field}[{i}].value")
        steps, step = group.steps, point.step
        if steps and step <= steps[-1]:
            unordered[id(group)] = group
        steps.append(step)
        group.timestamps.append(now_ms if point.timestamp is None else point.timestamp)
        group.values.append(value)
    for group in unordered.values():
        _put_in_step_order(group)
    return batch


def _put_in_step_order(group: KeyPoints) -> None:
    latest = dict(zip(group.steps, zip(group.timestamps, group.values, strict=True), strict=True))  # later wins
    group.steps[:] = sorted(latest)
    group.timestamps[:] = [latest[step][0] for step in group.steps]
    group.values[:] = [latest[step][1] for step in group.steps]


def clean_pairs(pairs: Any, field: str, limit: int, max_value: int) -> dict[str, str]:
    """Params or tags as {"k": "v"} or [{"key": k, "value": v}] (MLflow's shape); values become strings."""
    if pairs is None:
        return {}
    if isinstance(pairs, dict):
        items = list(pairs.items())
    elif isinstance(pairs, list):
        items = []
        for i, raw in enumerate(pairs):
            if not isinstance(raw, dict) or "key" not in raw:
                raise BatchError(f"{field}[{i}]", "must be an object with key and value")
            items.append((raw["key"], raw.get("value", "")))
    else:
        raise BatchError(field, "must be an object of key/values or a list of {key, value}")
    if len(items) > limit:
        raise BatchError(field, f"has {len(items)} entries; at most {limit}")
    out: dict[str, str] = {}
    for key, value in items:
        key = check_key(key, f"{field}.key")
        if isinstance(value, (dict, list)):
            raise BatchError(f"{field}.{key}", "must be a string, a number or a boolean")
        text = "" if value is None else str(value)
        if len(text) > max_value:
            raise BatchError(f"{field}.{key}", f"is {len(text)} characters long; at most {max_value}")
        if has_surrogate(text):
            raise BatchError(f"{field}.{key}", SURROGATE)
        out[key] = text
    return out


def spelled(value: float) -> str:
    """A non-finite value as JSON carries it, the way log-batch takes it: "NaN", "Infinity" or "-Infinity"."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def summarize(batch: Batch, summary: dict[str, dict]) -> dict[str, dict]:
    """The runs table's per-key figures merged with a batch: last (by step), min and max of finite values.

    A non-finite last value is kept as `last` null (so filters and sorts, which cast it to a number, pass over it)
    and named by `nonfinite` ("NaN", "Infinity", "-Infinity"), present only then."""
    merged = {k: dict(v) for k, v in summary.items()}
    for key, group in batch.items():
        entry = merged.setdefault(key, {"last": None, "step": -1, "min": None, "max": None})
        values = group.values
        if group.steps[-1] >= entry["step"]:
            last = values[-1]
            entry["step"], entry["last"] = group.steps[-1], last if math.isfinite(last) else None
            if math.isfinite(last):
                entry.pop("nonfinite", None)
            else:
                entry["nonfinite"] = spelled(last)
        finite = values if all(map(math.isfinite, values)) else [v for v in values if math.isfinite(v)]
        if finite:
            low, high = min(finite), max(finite)
            entry["min"] = low if entry["min"] is None else min(entry["min"], low)
            entry["max"] = high if entry["max"] is None else max(entry["max"], high)
    return merged


def shown_last(entry: dict) -> tuple[float | str | None, bool]:
    """A summary entry's last value as shown (the API, the runs table): the number, or the spelling of the non-finite
    value it was; and whether it is a finite number. None only in summaries kept before the spelling was."""
    kind = entry.get("nonfinite")
    if kind is not None:
        return kind, False
    last = entry.get("last")
    return last, last is not None
