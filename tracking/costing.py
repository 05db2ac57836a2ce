"""What runs cost: tracking knows when a run first reached a metric value, the costs app above knows what a job's
attempts cost up to a moment. Costs connects to `cost_source` in its AppConfig.ready() (as apps connect panels to
`tenancy.panels`); without it runs show no cost. Runs without a job (logged from a laptop or MLflow) cost nothing
Tidal metered, and show none."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

import numpy as np

from core.hooks import Hook
from tracking.models import Run, Series
from tracking.points import read_blocks

# {job id: until (epoch seconds) or None for now} -> {job id: cost}
JobCosts = Callable[[Mapping[int, int | None]], dict[int, float]]


class CostSource(NamedTuple):
    costs: JobCosts
    currency: Callable[[], str]


cost_source: Hook[CostSource] = Hook("tracking.costing.cost_source", single=True)


@dataclass(frozen=True)
class Target:
    """A metric value to reach: `key` first below (or above) `value`."""

    key: str
    value: float
    below: bool = True

    def __str__(self) -> str:
        return f"{self.key} {'<' if self.below else '>'} {self.value:g}"


class TargetError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def parse_target(key: str | None, below: str | None, above: str | None) -> Target | None:
    """The target of `?key=eval/loss&below=2.0` (or `above=`); None when no key is given."""
    if not key:
        if below or above:
            raise TargetError("key", "Name the metric the value is of.")
        return None
    if bool(below) == bool(above):
        raise TargetError("below", "Give one of below or above.")
    name = "below" if below else "above"
    raw = below or above or ""  # the one given
    try:
        value = float(raw)
    except ValueError:
        raise TargetError(name, "Must be a number.") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise TargetError(name, "Must be a finite number.")
    return Target(key.strip()[:250], value, below=bool(below))


@dataclass(frozen=True)
class Reached:
    step: int
    at: datetime
    cost: float | None


@dataclass(frozen=True)
class RunCost:
    currency: str
    cost: float
    reached: Reached | None = None  # None: the target was not reached (or none was asked)


def first_reached(run: Run, target: Target) -> tuple[int, int] | None:
    """(step, timestamp in ms) of the first point of the run's `target.key` past the target value (of a step
    logged by several attempts, the first attempt's), or None."""
    series = Series.objects.filter(run=run, key=target.key).values_list("id", flat=True)
    first: tuple[int, int, int] | None = None  # (step, attempt, timestamp)
    for block in read_blocks(series):  # each attempt's in step order
        if first is not None and first[:2] < (int(block.steps[0]), block.attempt):
            continue
        past = np.flatnonzero(block.values < target.value if target.below else block.values > target.value)
        if len(past):
            found = (int(block.steps[past[0]]), block.attempt, int(block.timestamps[past[0]]))
            first = found if first is None else min(first, found)
    return None if first is None else (first[0], first[2])


def run_costs(runs: Iterable[Run], target: Target | None = None) -> dict[int, RunCost]:
    """Each run with a job: its cost so far, and what it had cost when it first reached `target`."""
    if not cost_source.receivers:
        return {}
    costs, currency = cost_source.one()
    runs = [run for run in runs if run.job_id is not None]
    reached = {run.pk: first_reached(run, target) for run in runs} if target else {}
    so_far = costs({run.job_id: None for run in runs})
    until = {run.job_id: found[1] // 1000 for run in runs if (found := reached.get(run.pk))}
    at_target = costs(until) if until else {}
    found_cost = {}
    for run in runs:
        found = reached.get(run.pk)
        if found:
            found_cost[run.pk] = Reached(found[0], datetime.fromtimestamp(found[1] / 1000, UTC),
                                         at_target.get(run.job_id))
    return {run.pk: RunCost(currency(), so_far.get(run.job_id, 0.0), found_cost.get(run.pk)) for run in runs}
