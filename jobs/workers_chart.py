"""An elastic job's workers over time, for the job page's small step chart (issue 29): each attempt holds its
admission's replicas from its admission, then each resize's `new_replicas` from its `at`, and none once it ended.

The chart is drawn server-side as an SVG path (no script, so the page's Content-Security-Policy has nothing to
allow and htmx's refresh of the live part redraws it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from jobs.models import Attempt

WIDTH = 600  # the SVG's user units; the element itself stretches to the card's width
HEIGHT = 60


@dataclass(frozen=True)
class Chart:
    path: str  # the step line, in a WIDTH x HEIGHT box (y down)
    most: int  # the top of the y axis
    start: datetime
    end: datetime
    viewbox: str = f"0 0 {WIDTH} {HEIGHT}"


def workers_over_time(attempts: Iterable[Attempt], now: datetime) -> list[tuple[datetime, int]]:
    """(moment, workers from then on) for every change, in time order: attempts' admissions, resizes, ends."""
    steps: list[tuple[datetime, int]] = []
    for attempt in sorted(attempts, key=lambda a: a.number):
        resizes = sorted(attempt.resizes.all(), key=lambda r: (r.at, r.pk))
        # The placement is the attempt's current one: before its first resize it held that resize's old size.
        first = resizes[0].old_replicas if resizes else len(attempt.placement)
        steps.append((attempt.admitted_at, first))
        steps += [(r.at, r.new_replicas) for r in resizes]
        if attempt.ended_at is not None:
            steps.append((attempt.ended_at, 0))
    if steps and steps[-1][0] < now and steps[-1][1] > 0:
        steps.append((now, steps[-1][1]))  # the open attempt holds its size up to now
    return steps


def workers_chart(attempts: Iterable[Attempt], now: datetime, most: int) -> Chart | None:
    """The step chart over the job's attempts, its y axis 0..`most` (the job's maximum, or more if a lowered maximum
    left an earlier size above it); None before the first admission."""
    steps = workers_over_time(attempts, now)
    if not steps:
        return None
    start, end = steps[0][0], max(steps[-1][0], steps[0][0])
    top = max(most, *(w for _, w in steps), 1)
    span = (end - start).total_seconds() or 1.0

    def x(moment: datetime) -> str:
        return f"{(moment - start).total_seconds() / span * WIDTH:.1f}"

    def y(workers: int) -> str:
        return f"{HEIGHT - workers / top * (HEIGHT - 2):.1f}"  # 2 units of room so the top line is not clipped

    path = [f"M0,{y(0)}"]
    for moment, workers in steps:
        path += [f"H{x(moment)}", f"V{y(workers)}"]
    path.append(f"H{x(end)}")
    return Chart(" ".join(path), top, start, end)
