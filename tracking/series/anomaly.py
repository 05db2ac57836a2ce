"""Anomaly rules over a run's metric series, evaluated batch by batch (pure: no Django, no I/O).

Ingestion calls `evaluate_batch` with the run's detector state (plain JSON: per key a small rolling window and a
few counters), the batch's points and the project's enabled rules; it returns what opened and what cleared, in step
order, and the new state. A batch that continues its keys costs its own points plus a median of at most `window`
values per point of the keys that keep a window; only points that arrive after later ones of their key (judged
late) need the values logged before them, which the caller reads (`History`).

The hung-run rule needs no points (a running job whose run logged no new step for a while): `hung_run` judges it for
the periodic check. The idle-GPU rule is judged from GPU telemetry as it is read (`gpu_idle`).
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from operator import itemgetter
from typing import Any, Literal, NamedTuple

import numpy as np

NON_FINITE = "non_finite"
LOSS_SPIKE = "loss_spike"
LOSS_PLATEAU = "loss_plateau"
GRAD_NORM_EXPLOSION = "grad_norm_explosion"
THROUGHPUT_DROP = "throughput_drop"
GPU_UTIL_COLLAPSE = "gpu_util_collapse"
HUNG_RUN = "hung_run"
GPU_IDLE = "gpu_idle"
RULES = (NON_FINITE, LOSS_SPIKE, LOSS_PLATEAU, GRAD_NORM_EXPLOSION, THROUGHPUT_DROP, GPU_UTIL_COLLAPSE, HUNG_RUN,
         GPU_IDLE)

DEFAULTS: dict[str, dict[str, float]] = {
    NON_FINITE: {},
    LOSS_SPIKE: {"window": 100, "z": 6.0, "min_points": 20},
    LOSS_PLATEAU: {"steps": 1000, "min_delta": 0.01},
    GRAD_NORM_EXPLOSION: {"window": 100, "factor": 10.0, "min_points": 10},
    THROUGHPUT_DROP: {"window": 100, "fraction": 0.5, "min_points": 10},
    GPU_UTIL_COLLAPSE: {"below": 10.0, "above": 50.0, "points": 5},
    HUNG_RUN: {"minutes": 15.0},
    # Judged from the GPU telemetry of the attempt (the `telemetry` app), not from logged points: every GPU's SM
    # activity under `below` percent for `minutes`.
    GPU_IDLE: {"below": 5.0, "minutes": 15.0},
}
# A converged run improves by less than any epsilon: a plateau alert is opt-in, per project.
ENABLED_BY_DEFAULT = frozenset(RULES) - {LOSS_PLATEAU}

# parameter: (type, lowest, highest), both inclusive
LIMITS: dict[str, tuple[type, float, float]] = {
    "window": (int, 5, 10_000),
    "min_points": (int, 3, 10_000),
    "z": (float, 2.0, 1000.0),
    "steps": (int, 1, 10**12),
    "min_delta": (float, 0.0, 0.99),
    "factor": (float, 1.5, 1e6),
    "fraction": (float, 0.01, 0.99),
    "below": (float, 0.0, 100.0),
    "above": (float, 0.0, 100.0),
    "points": (int, 1, 10_000),
    "minutes": (float, 1.0, 10_080.0),
}
THROUGHPUT_KEYS = ("samples_per_s", "tokens_per_s", "throughput")
GPU_UTIL_PATTERN = "system/gpu*util*"
# The rules whose baseline is the key's rolling window of finite values.
WINDOW_RULES = (LOSS_SPIKE, GRAD_NORM_EXPLOSION, THROUGHPUT_DROP)
_MAD_TO_SIGMA = 1.4826  # the MAD of normal noise is 0.6745 sigma
# Points between two computations of a key's window median (and MAD): each costs a sort of the window, and doing
# it for every point made the checks cost more than the rest of ingestion. A point is judged against the window
# as it was at most STRIDE - 1 points before it.
STRIDE = 25
MAX_RUN = 256  # points checked whole at most, for keys without a window (only NaN/Inf, GPU utilisation)


class ParamError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class Finding(NamedTuple):
    rule: str
    key: str
    step: int | None
    value: float | None
    message: str


class Cleared(NamedTuple):
    rule: str
    key: str
    step: int | None


Event = Finding | Cleared
# The baseline of late points: (key, step, n) -> the last n finite values of the key logged before `step`, oldest
# first (ingestion reads them from the stored points). Without it, late points are judged against each other only.
History = Callable[[str, int, int], Sequence[float]]


def check_params(rule: str | None, params: Any) -> dict[str, float]:
    """A rule's parameters merged over its defaults; ParamError names the first bad one ("params.<name>"). No rule
    (an update that names none, of no rule) is refused as an unknown one."""
    if rule is None or rule not in DEFAULTS:
        raise ParamError("rule", f"{rule!r} is not a rule; one of {', '.join(RULES)}")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ParamError("params", "must be an object of parameter values")
    merged: dict[str, float] = dict(DEFAULTS[rule])
    for name, value in params.items():
        field = f"params.{name}"
        if name not in merged:
            known = ", ".join(DEFAULTS[rule]) or "none"
            raise ParamError(field, f"is not a parameter of {rule} (its parameters: {known})")
        kind, low, high = LIMITS[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or (
                kind is int and not float(value).is_integer()):
            raise ParamError(field, f"must be {'an integer' if kind is int else 'a number'}")
        if not low <= value <= high:
            raise ParamError(field, f"must be between {low:g} and {high:g}")
        merged[name] = kind(value)
    if "min_points" in merged and merged["min_points"] > merged["window"]:
        raise ParamError("params.min_points", "must not exceed the window")
    if rule == GPU_UTIL_COLLAPSE and merged["below"] >= merged["above"]:
        raise ParamError("params.below", "must be lower than `above`")
    return merged


def active_rules(configured: Iterable[tuple[str, bool, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """The rules to evaluate and their parameters: the defaults, overridden by a project's (rule, enabled, params)."""
    active = {rule: dict(DEFAULTS[rule]) for rule in ENABLED_BY_DEFAULT}
    for rule, enabled, params in configured:
        if enabled:
            active[rule] = {**DEFAULTS[rule], **params}
        else:
            active.pop(rule, None)
    return active


def rules_for_key(key: str) -> tuple[str, ...]:
    lowered = key.lower()
    rules = [NON_FINITE]
    if "loss" in lowered:
        rules += [LOSS_SPIKE, LOSS_PLATEAU]
    if "grad_norm" in lowered:
        rules.append(GRAD_NORM_EXPLOSION)
    if any(name in lowered for name in THROUGHPUT_KEYS):
        rules.append(THROUGHPUT_DROP)
    if fnmatchcase(lowered, GPU_UTIL_PATTERN):
        rules.append(GPU_UTIL_COLLAPSE)
    return tuple(rules)


def evaluate_batch(state: Mapping[str, Any], points: Iterable[tuple[str, int, float]],
                   rules: Mapping[str, Mapping[str, float]], attempt: int,
                   history: History | None = None) -> tuple[list[Event], dict[str, Any]]:
    """Evaluate a batch's (key, step, value) points against the run's detector `state`.

    Returns the events in step order (a Finding when a rule starts firing on a key, a Cleared when it stops) and the
    new state; `state` is not modified. Every point is judged, whatever order batches arrive in: a point at or below
    the last step judged of its key (a batch that arrived after a later one) is judged late (`_judge_late`), and a
    batch of a later attempt judges its key from the start again (a restart from a checkpoint logs those steps
    again). Leaving out a retried batch's points, already judged, is the caller's: it knows which are stored.
    `history` gives late points their baseline (see `History`)."""
    by_key: dict[str, list[tuple[int, float]]] = {}
    for key, step, value in points:
        by_key.setdefault(key, []).append((step, value))
    ordered = {key: sorted(series) for key, series in by_key.items()}
    return evaluate_series(state, {key: ([p[0] for p in series], [p[1] for p in series])
                                   for key, series in ordered.items()}, rules, attempt, history)


def evaluate_series(state: Mapping[str, Any], series: Mapping[str, tuple[Sequence[int], Sequence[float]]],
                    rules: Mapping[str, Mapping[str, float]], attempt: int,
                    history: History | None = None,
                    arrays: Mapping[str, np.ndarray] | None = None) -> tuple[list[Event], dict[str, Any]]:
    """`evaluate_batch` of points already grouped by key, each key's as columns (steps, values) in step order: what
    ingestion holds, so nothing is regrouped or sorted again. `arrays`: keys' values as float64 arrays where the
    caller has them (ingestion converts them once for the stored blocks and these checks: see evaluate_columns).

    Each key follows the latest attempt that logged it ("a"; before it was kept, the run's "attempt"): a batch of a
    later attempt starts the key over, one of an earlier attempt (a pod of an ended attempt, a spool delivered
    late) is judged late."""
    run_attempt = state.get("attempt", attempt)
    keys: dict[str, dict[str, Any]] = dict(state.get("keys", {}))
    events: list[Event] = []
    for key, (steps, values) in series.items():
        known = keys.get(key, {})
        followed = known.get("a", run_attempt)
        found, after = evaluate_columns(key, known, steps, values, rules, resumed=attempt > followed,
                                        late=attempt < followed, history=history,
                                        array=None if arrays is None else arrays.get(key))
        keys[key] = {**after, "a": max(attempt, followed)}
        events += found
    events.sort(key=lambda e: -1 if e.step is None else e.step)
    return events, {**state, "attempt": max(attempt, run_attempt), "keys": keys}


def evaluate_columns(key: str, state: Mapping[str, Any], steps: Sequence[int], values: Sequence[float],
                     rules: Mapping[str, Mapping[str, float]], *, resumed: bool = False, late: bool = False,
                     history: History | None = None,
                     array: np.ndarray | None = None) -> tuple[list[Event], dict[str, Any]]:
    """`evaluate_key` of a key's points as columns in step order. Points at or below the last step judged (all of
    them with `late`) are judged late (`_judge_late`). Of the others, a healthy run's batch is quiet from end to
    end, and one in a lasting anomaly fires from end to end, so each is first judged whole (`_quiet_batch`,
    `_lasting_batch`); any other goes point by point through `evaluate_key`. `array`: `values` as a float64 array,
    when the caller has it (converting a Python list costs some 26 ns a value, as much as judging a quiet batch)."""
    last = -1 if resumed else state.get("s", -1)
    start = len(steps) if late else bisect_right(steps, last)
    events = _judge_late(key, state, steps[:start], values[:start], rules, history) if start else []
    if start:  # no copy of a batch that continues its key, the common case
        steps, values = steps[start:], values[start:]
        if not steps:
            return events, dict(state)
        array = None if array is None else array[start:]
    column = np.asarray(values, dtype=float) if array is None else array
    names = [rule for rule in rules_for_key(key) if rule in rules]
    checks = [(rule, rules[rule]) for rule in names]
    judge = _lasting_batch if state.get("on") else _quiet_batch
    quiet = judge(state, steps, values, column, checks)
    if quiet is not None:
        return events, quiet
    found, after = evaluate_key(key, state, list(zip(steps, values, strict=True)), rules, resumed=resumed,
                                ordered=True)
    return events + found, after


def _judge_late(key: str, state: Mapping[str, Any], steps: Sequence[int], values: Sequence[float],
                rules: Mapping[str, Mapping[str, float]], history: History | None) -> list[Event]:
    """The events of points that arrived after later points of their key were judged (a spool delivered after an
    outage, MLflow's asynchronous logging, two senders of one run), judged in step order by the same checks as
    points that come next, the key's state left as it is: against the finite values logged before them (`history`;
    the key's window follows its latest points, which may lie far along a decaying loss), then each other.

    The key's later points were judged already, so a rule that fires on late points and not on the key now closes
    again at the last late point (in step order, the later points cleared it); a rule firing now has its alert open
    already, and a late point cannot clear it. The plateau rule is left out: it measures the key's progress, which
    an earlier step cannot extend."""
    if not steps:
        return []
    judged = {rule: params for rule, params in rules.items() if rule != LOSS_PLATEAU}
    size = max((int(judged[rule]["window"]) for rule in rules_for_key(key) if rule in judged and rule in WINDOW_RULES),
               default=0)
    scratch: dict[str, Any] = {"high": True} if state.get("high") else {}
    if size:
        scratch["w"] = list(history(key, steps[0], size)) if history is not None else []
    found, after = evaluate_key(key, scratch, list(zip(steps, values, strict=True)), judged, ordered=True)
    firing = set(state.get("on", []))
    return ([event for event in found if event.rule not in firing]
            + [Cleared(rule, key, steps[-1]) for rule in after["on"] if rule not in firing])


def _quiet_batch(state: Mapping[str, Any], steps: Sequence[int], values: Sequence[float], column: np.ndarray,
                 checks: list[tuple[str, Mapping[str, float]]]) -> dict[str, Any] | None:
    """The state `evaluate_key` would leave after a batch in which nothing opens or clears, or None when that may
    not be so (then the batch is judged point by point).

    The same verdicts as `_quiet_run` applied run after run, computed for the whole batch at once: the window's
    statistics at every STRIDE-th point (the points where `evaluate_key` computes them again, counted from the
    batch's first point) in one numpy call over the windows they would be taken from, each stretch's minimum and
    maximum held against them. Only with no rule firing and a full window (its length the same at every stretch)."""
    if not values or state.get("on"):
        return None
    if not np.isfinite(column).all():  # `column`: `values` as an array, for finiteness and the extremes
        return None
    lowest, highest = float(column.min()), float(column.max())
    windowed = [(rule, params) for rule, params in checks if rule in WINDOW_RULES]
    size = max((int(params["window"]) for _, params in windowed), default=0)
    old = list(state.get("w", []))
    if size and len(old) < size:
        return None
    for rule, params in windowed:
        if _may_fire_in_batch(rule, params, old[-int(params["window"]):], column, lowest, highest):
            return None
    st: dict[str, Any] = {**state, "on": [], "s": steps[-1]}
    if not _others_quiet(st, steps, values, column, lowest, highest, checks):
        return None
    if size:
        st["w"] = (old + list(values[-size:]))[-size:]
    else:
        st.pop("w", None)
    return st


def _lasting_batch(state: Mapping[str, Any], steps: Sequence[int], values: Sequence[float], column: np.ndarray,
                   checks: list[tuple[str, Mapping[str, float]]]) -> dict[str, Any] | None:
    """The state `evaluate_key` would leave after a batch during which the window rules already firing fire at
    every point and nothing else opens or clears (a throughput that stays down, a gradient norm that stays up), or
    None when that may not be so.

    A point that fires a window rule stays out of the window, so through such a batch the window does not change:
    every point is judged against the same median (and MAD), and each rule's verdict on the batch follows from the
    batch's extremes (each check is monotonic in the value)."""
    firing = set(state.get("on", []))
    # A firing rule the project turned off since is no longer judged, so it may not hold the window still.
    if not values or not firing <= set(WINDOW_RULES) or not firing <= {rule for rule, _ in checks}:
        return None
    if not np.isfinite(column).all():
        return None
    lowest, highest = float(column.min()), float(column.max())
    window = list(state.get("w", []))
    size = 0
    for rule, params in checks:
        if rule not in WINDOW_RULES:
            continue
        size = max(size, int(params["window"]))
        recent = window[-int(params["window"]):]
        if len(recent) < params["min_points"]:
            return None
        median = statistics.median(recent)
        mad = statistics.median(abs(x - median) for x in recent) if rule == LOSS_SPIKE else None
        if rule in firing:
            # It fires at every point if it fires at the one least likely to: the highest for a drop, the lowest
            # for a spike or an explosion.
            least = highest if rule == THROUGHPUT_DROP else lowest
            if not _may_fire(rule, params, median, mad, least, least):
                return None
        elif _may_fire(rule, params, median, mad, lowest, highest):
            return None
    st: dict[str, Any] = {**state, "s": steps[-1], "w": window[-size:]}
    return st if _others_quiet(st, steps, values, column, lowest, highest, checks) else None


def _others_quiet(st: dict[str, Any], steps: Sequence[int], values: Sequence[float], column: np.ndarray,
                  lowest: float, highest: float, checks: list[tuple[str, Mapping[str, float]]]) -> bool:
    """The rules without a window through a batch of finite values (`column` as an array, `lowest` and `highest`
    its extremes), following their counters in `st` as judging each point would; False when one may open."""
    for rule, params in checks:
        if rule == GPU_UTIL_COLLAPSE and not _gpu_quiet(st, column, lowest, highest, params):
            return False
        if rule == LOSS_PLATEAU and not _plateau_quiet(zip(steps, values, strict=True), st, params):
            return False
    return True


def _gpu_quiet(st: dict, column: np.ndarray, lowest: float, highest: float, params: Mapping[str, float]) -> bool:
    """Follow the GPU rule's counters through finite values as `_gpu_util_collapse` would one by one; False (the
    state untouched) when some point may fire. It fires only after the key was high, then low for `points` values
    in a row: values that never fall below `below` cannot fire it, nor can a key that neither was nor gets high."""
    if lowest >= params["below"]:
        st["low"] = 0
        if highest >= params["above"]:
            st["high"] = True
        return True
    if st.get("high") or highest >= params["above"]:
        return False
    not_low = np.flatnonzero(column >= params["below"])
    st["low"] = st.get("low", 0) + len(column) if not len(not_low) else len(column) - 1 - int(not_low[-1])
    return True


def _may_fire_in_batch(rule: str, params: Mapping[str, float], window: list[float], column: np.ndarray,
                       lowest: float, highest: float) -> bool:
    """`_may_fire` for every STRIDE-point stretch of the batch (`column`, whose extremes are `lowest` and
    `highest`), against the window (`window`: the values before the batch) as it stands at its start."""
    if _bounded_quiet(rule, params, window, lowest, highest):
        return False
    size = int(params["window"])
    history = np.concatenate((np.asarray(window, dtype=float), column))
    starts = np.arange(0, len(column), STRIDE)
    windows = history[starts[:, None] + np.arange(size)]  # the `size` values before each stretch
    median = _row_medians(windows)
    low = np.minimum.reduceat(history[size:], starts)
    high = np.maximum.reduceat(history[size:], starts)
    if rule == LOSS_SPIKE:
        mad = _row_medians(np.abs(windows - median[:, None]))
        scale = np.maximum(np.maximum(_MAD_TO_SIGMA * mad, 1e-3 * np.abs(median)), 1e-12)
        return bool(np.any((high - median) / scale > params["z"]))
    if rule == GRAD_NORM_EXPLOSION:
        return bool(np.any((median > 0) & (high > params["factor"] * median)))
    return bool(np.any((median > 0) & (low < params["fraction"] * median)))  # THROUGHPUT_DROP


def _row_medians(rows: np.ndarray) -> np.ndarray:
    """Each row's median, as np.median computes it, partitioning `rows` in place (the caller's scratch copy)."""
    middle = rows.shape[1] // 2
    if rows.shape[1] % 2:
        rows.partition(middle, axis=1)
        return rows[:, middle].copy()
    rows.partition((middle - 1, middle), axis=1)
    medians: np.ndarray = (rows[:, middle - 1] + rows[:, middle]) / 2
    return medians


def _bounded_quiet(rule: str, params: Mapping[str, float], window: list[float], lowest: float,
                   highest: float) -> bool:
    """Whether a window rule of ratios cannot fire anywhere in the batch, from extremes alone: every stretch's
    median lies between the lowest and the highest value of the window and the batch (`lowest`, `highest`), so a
    steady series (a gradient norm, a throughput) is settled without computing a median."""
    if rule == GRAD_NORM_EXPLOSION:  # fires when a value exceeds factor x a positive median
        floor = min(lowest, min(window, default=math.inf))
        return floor > 0 and highest <= params["factor"] * floor
    if rule == THROUGHPUT_DROP:  # fires when a value falls below fraction x a positive median
        return lowest >= params["fraction"] * max(highest, max(window, default=-math.inf))
    return False


def evaluate_key(key: str, state: Mapping[str, Any], points: Sequence[tuple[int, float]],
                 rules: Mapping[str, Mapping[str, float]], *, resumed: bool = False, fast: bool = True,
                 ordered: bool = False) -> tuple[list[Event], dict[str, Any]]:
    """One key: `state` holds "w" (the recent finite values, oldest first), "s" (the last step seen), "on" (the
    rules firing), and the plateau's "best"/"bs" and the GPU rule's "low"/"high" counters.

    While no rule fires, runs of points are first checked whole (`_quiet_run`: a few min/max over the run against
    the same baseline each point would be judged against); only a run that may change something is judged point
    by point. `fast=False` judges every point (the tests compare the two). `ordered`: `points` is a sequence in
    step order already."""
    st: dict[str, Any] = {**state, "w": list(state.get("w", [])), "on": list(state.get("on", [])), "_stats": {},
                          "_n": 0}
    names = [rule for rule in rules_for_key(key) if rule in rules]
    size = max((int(rules[r]["window"]) for r in names if r in WINDOW_RULES), default=0)
    firing = set(st["on"])
    last = -1 if resumed else st.get("s", -1)
    events: list[Event] = []
    checks = [(rule, _CHECKS[rule], rules[rule], rule in WINDOW_RULES) for rule in names]
    if ordered:
        todo = list(points[bisect_right(points, last, key=itemgetter(0)):])
    else:
        todo = [point for point in sorted(points) if point[0] > last]
    i = slow_until = 0
    while i < len(todo):
        quiet = _quiet_run(todo, i, st, checks, size) if fast and not firing and i >= slow_until else 0
        if quiet:  # nothing fires and nothing clears: the points only join the window
            i += quiet
            last = todo[i - 1][0]
            continue
        if i >= slow_until:  # the run was not quiet: its points one by one before trying again
            slow_until = i + STRIDE
        step, value = todo[i]
        i += 1
        last = step
        baseline_fired = False
        for rule, check, params, on_window in checks:
            verdict = check(key, step, value, st, params)
            if verdict is None:
                continue
            if verdict is False:
                if rule in firing:
                    firing.discard(rule)
                    events.append(Cleared(rule, key, step))
                continue
            baseline_fired = baseline_fired or on_window
            if rule not in firing:
                firing.add(rule)
                events.append(Finding(rule, key, step, value, verdict))
        # An anomalous value stays out of the baseline it is judged against, so a lasting drop keeps alerting.
        if size and not baseline_fired and math.isfinite(value):
            window = st["w"]
            window.append(value)
            if len(window) > 2 * size:  # trimmed now and then, not copied at every point
                del window[:-size]
            st["_n"] += 1
    st["s"], st["on"] = last, sorted(firing)
    st["w"] = st["w"][-size:]
    del st["_stats"], st["_n"]
    if not size:
        st.pop("w")
    return events, st


def _quiet_run(todo: list[tuple[int, float]], start: int, st: dict, checks: list, size: int) -> int:
    """How many points from `start` on would neither open nor clear anything when judged one by one (0: judge
    them one by one), with the state updated as judging them would; at most up to the next recomputation of the
    window's statistics, so every point of the run is held to the same baseline as it would be alone."""
    end = min(len(todo), start + MAX_RUN)
    bounds = []
    plateau = None
    for rule, _, params, on_window in checks:
        if rule == LOSS_PLATEAU:
            plateau = params
        elif on_window:
            window_size = int(params["window"])
            if min(window_size, len(st["w"])) < params["min_points"]:
                return 0
            median, mad = _window_stats(st, window_size, spread=rule == LOSS_SPIKE)
            end = min(end, start + STRIDE - (st["_n"] - st["_stats"][window_size][2]))
            bounds.append((rule, params, median, mad))
    values = [value for _, value in todo[start:end]]
    if not values or not all(map(math.isfinite, values)):
        return 0
    low, high = min(values), max(values)
    if any(_may_fire(rule, params, median, mad, low, high) for rule, params, median, mad in bounds):
        return 0
    if plateau is not None and not _plateau_quiet(todo[start:end], st, plateau):
        return 0
    gpu = next((params for rule, _, params, _ in checks if rule == GPU_UTIL_COLLAPSE), None)
    if gpu is not None and not _gpu_quiet(st, np.asarray(values, dtype=float), low, high, gpu):
        return 0
    if size:
        window = st["w"]
        window.extend(values)
        if len(window) > 2 * size:
            del window[:-size]
        st["_n"] += len(values)
    return len(values)


def _plateau_quiet(run: Iterable[tuple[int, float]], st: dict, params: Mapping[str, float]) -> bool:
    """Follow the plateau rule's best value through a run of finite points, as `_loss_plateau` would one by one;
    False (the state untouched) when some point of it would fire."""
    best, since = st.get("best"), int(st.get("bs", 0))  # "bs" is set with "best"
    min_delta, patience = params["min_delta"], params["steps"]
    for step, value in run:
        if best is None or value < best - min_delta * abs(best):
            best, since = value, step
        elif step - since >= patience:
            return False
    st["best"], st["bs"] = best, since
    return True


def _may_fire(rule: str, params: Mapping[str, float], median: float, mad: float | None, low: float,
              high: float) -> bool:
    """Whether a window rule could fire on some value in [low, high]: the same comparisons as its check, on the
    extreme value (each is monotonic in the value)."""
    if rule == LOSS_SPIKE:
        scale = max(_MAD_TO_SIGMA * (mad or 0.0), 1e-3 * abs(median), 1e-12)
        return (high - median) / scale > params["z"]
    if median <= 0:
        return False
    if rule == GRAD_NORM_EXPLOSION:
        return high > params["factor"] * median
    return low < params["fraction"] * median  # THROUGHPUT_DROP


def _window_stats(st: dict, size: int, *, spread: bool = False) -> tuple[float, float]:
    """Median (and, with `spread`, the median absolute deviation) of the key's last `size` window values, computed
    again once STRIDE values joined the window since the last time."""
    known = st["_stats"].get(size)
    if known is None or st["_n"] - known[2] >= STRIDE or (spread and known[1] is None):
        window = st["w"][-size:]
        median = statistics.median(window)
        mad = statistics.median(abs(x - median) for x in window) if spread else None
        known = st["_stats"][size] = (median, mad, st["_n"])
    return known[0], known[1]


# A check returns a message (firing), False (the condition does not hold) or None (no judgement on this point: a
# non-finite value for a value rule, too short a window), which keeps the rule's status as it was.
Verdict = str | Literal[False] | None


def _non_finite(key: str, step: int, value: float, st: dict, params: Mapping[str, float]) -> Verdict:
    if math.isfinite(value):
        return False
    return f"{key} is {_shown(value)} at step {step}"


def _loss_spike(key: str, step: int, value: float, st: dict, params: Mapping[str, float]) -> Verdict:
    size = int(params["window"])
    count = min(size, len(st["w"]))
    if not math.isfinite(value) or count < params["min_points"]:
        return None
    median, mad = _window_stats(st, size, spread=True)
    # A flat window has no spread: a relative floor keeps a change in the 4th digit from being "infinitely" rare.
    scale = max(_MAD_TO_SIGMA * mad, 1e-3 * abs(median), 1e-12)
    z = (value - median) / scale
    if z <= params["z"]:
        return False
    return (f"{key} jumped to {value:.4g} at step {step}: {z:.1f} robust standard deviations above the median "
            f"{median:.4g} of the previous {count} points (threshold {params['z']:g})")


def _loss_plateau(key: str, step: int, value: float, st: dict, params: Mapping[str, float]) -> Verdict:
    if not math.isfinite(value):
        return None
    best = st.get("best")
    if best is None or value < best - params["min_delta"] * abs(best):
        st["best"], st["bs"] = value, step
        return False
    if step - st["bs"] < params["steps"]:
        return False
    return (f"{key} has not improved by more than {params['min_delta']:.2%} on its best {best:.4g} (step "
            f"{st['bs']}) for {step - st['bs']} steps")


def _grad_norm_explosion(key: str, step: int, value: float, st: dict, params: Mapping[str, float]) -> Verdict:
    if not math.isfinite(value):
        return f"{key} is {_shown(value)} at step {step}"
    size = int(params["window"])
    count = min(size, len(st["w"]))
    if count < params["min_points"]:
        return None
    median, _ = _window_stats(st, size)
    if median <= 0 or value <= params["factor"] * median:
        return False
    return (f"{key} is {value:.4g} at step {step}: {value / median:.1f}x the median {median:.4g} of the previous "
            f"{count} points (threshold {params['factor']:g}x)")


def _throughput_drop(key: str, step: int, value: float, st: dict, params: Mapping[str, float]) -> Verdict:
    size = int(params["window"])
    count = min(size, len(st["w"]))
    if not math.isfinite(value) or count < params["min_points"]:
        return None
    median, _ = _window_stats(st, size)
    if median <= 0 or value >= params["fraction"] * median:
        return False
    return (f"{key} fell to {value:.4g} at step {step}: {value / median:.0%} of the median {median:.4g} of the "
            f"previous {count} points (threshold {params['fraction']:.0%})")


def _gpu_util_collapse(key: str, step: int, value: float, st: dict, params: Mapping[str, float]) -> Verdict:
    if not math.isfinite(value):
        return None
    if value >= params["above"]:
        st["high"] = True
    st["low"] = st.get("low", 0) + 1 if value < params["below"] else 0
    if not st.get("high") or st["low"] < params["points"]:
        return False
    return (f"{key} has been below {params['below']:g} for {st['low']} points (now {value:.3g} at step {step}) "
            f"after having been above {params['above']:g}")


_CHECKS = {NON_FINITE: _non_finite, LOSS_SPIKE: _loss_spike, LOSS_PLATEAU: _loss_plateau,
           GRAD_NORM_EXPLOSION: _grad_norm_explosion, THROUGHPUT_DROP: _throughput_drop,
           GPU_UTIL_COLLAPSE: _gpu_util_collapse}


def hung_run(idle_seconds: float, last_step: int | None, params: Mapping[str, float]) -> Finding | None:
    """A running job's run that logged no new step for `params["minutes"]`."""
    if idle_seconds < params["minutes"] * 60:
        return None
    where = f" (last step {last_step})" if last_step is not None else ""
    return Finding(HUNG_RUN, "", last_step, None, f"the job is running but its run logged no new step for "
                   f"{idle_seconds / 60:.0f} minutes{where}; threshold {params['minutes']:g} minutes")


def _shown(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def gpu_idle(idle_seconds: float, params: Mapping[str, float]) -> Finding | None:
    """An attempt whose every GPU's SM activity stayed under `params["below"]` percent for `params["minutes"]`."""
    if idle_seconds < params["minutes"] * 60:
        return None
    return Finding(GPU_IDLE, "", None, None, f"every GPU of the job has been idle (SM activity under "
                   f"{params['below']:g}%) for {idle_seconds / 60:.0f} minutes; threshold {params['minutes']:g} "
                   "minutes")
