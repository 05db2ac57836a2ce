"""Rollups: per-chunk aggregates of a series, so a long series is read as a few thousand rows, not millions.

A chunk of level L holds the steps [c * W, (c + 1) * W) with W = LEVEL_STEPS[L]; its aggregate keeps the points a
chart must never lose: the smallest and the largest finite value with their steps, the first NaN, +Inf and -Inf,
plus the count, sum and last value (for means and for cold storage). Aggregates merge, so a batch updates only the
chunks it touches. Downsampling from rollups groups whole consecutive chunks into buckets, so each bucket's
minimum and maximum are exactly those of its points.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from tracking.series.downsample import Downsampled, Point

LEVEL_STEPS = (1024, 32_768, 1_048_576)


@dataclass(frozen=True)
class Aggregate:
    chunk: int
    count: int
    first_step: int
    last_step: int
    last_value: float | None  # None: NaN
    finite: int = 0
    total: float = 0.0  # sum of the finite values
    min_step: int | None = None
    min_value: float | None = None
    max_step: int | None = None
    max_value: float | None = None
    nan_step: int | None = None
    posinf_step: int | None = None
    neginf_step: int | None = None


def aggregate(points: Sequence[Point], width: int) -> dict[int, Aggregate]:
    """Points (step, value) of one series, any order -> their aggregate per chunk of `width` steps."""
    ordered = sorted(points)
    return aggregate_ordered([p[0] for p in ordered], [p[1] for p in ordered], width)


def aggregate_ordered(steps: Sequence[int], values: Sequence[float], width: int) -> dict[int, Aggregate]:
    """`aggregate` of points given as columns in step order, as ingestion holds them: each chunk is a slice, and
    its figures come from min, max, index and fsum over it (C loops: this runs for every point ingested)."""
    out: dict[int, Aggregate] = {}
    start = 0
    while start < len(steps):
        chunk = steps[start] // width
        end = bisect_left(steps, (chunk + 1) * width, start)
        out[chunk] = _of_chunk(chunk, steps[start:end], values[start:end])
        start = end
    return out


def _of_chunk(chunk: int, steps: Sequence[int], values: Sequence[float]) -> Aggregate:
    if all(map(math.isfinite, values)):
        finite_steps, finite = steps, values
        odd: dict[str, int | None] = {"nan": None, "inf": None, "-inf": None}
    else:
        finite_steps = [s for s, v in zip(steps, values, strict=True) if math.isfinite(v)]
        finite = [v for v in values if math.isfinite(v)]
        odd = {"nan": None, "inf": None, "-inf": None}
        for step, value in zip(steps, values, strict=True):
            if not math.isfinite(value):
                kind = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
                odd[kind] = step if odd[kind] is None else odd[kind]
    low: tuple[int | None, float | None] = (None, None)
    high = low
    if finite:
        # The first of equal extremes is at the lowest step: the steps are in order.
        low_value, high_value = min(finite), max(finite)
        low = (finite_steps[finite.index(low_value)], low_value)
        high = (finite_steps[finite.index(high_value)], high_value)
    last = values[-1]
    return Aggregate(chunk, len(steps), steps[0], steps[-1], None if math.isnan(last) else last, len(finite),
                     math.fsum(finite), low[0], low[1], high[0], high[1], odd["nan"], odd["inf"], odd["-inf"])


def coarser(chunks: dict[int, Aggregate], factor: int) -> dict[int, Aggregate]:
    """Aggregates of chunks `factor` times wider, from the finer ones."""
    out: dict[int, Aggregate] = {}
    for chunk in sorted(chunks):
        wide = replace(chunks[chunk], chunk=chunk // factor)
        out[wide.chunk] = merge(out[wide.chunk], wide) if wide.chunk in out else wide
    return out


def merge(a: Aggregate, b: Aggregate) -> Aggregate:
    """The aggregate of both (same chunk)."""
    last = a if a.last_step > b.last_step else b
    low = min((x for x in (a, b) if x.min_value is not None), key=lambda x: (x.min_value, x.min_step), default=a)
    # A chunk with a max value has its step too.
    high = max((x for x in (a, b) if x.max_value is not None), key=lambda x: (x.max_value, -(x.max_step or 0)),
               default=a)
    return Aggregate(
        a.chunk, a.count + b.count, min(a.first_step, b.first_step), last.last_step, last.last_value,
        a.finite + b.finite, a.total + b.total, low.min_step, low.min_value, high.max_step, high.max_value,
        _first(a.nan_step, b.nan_step), _first(a.posinf_step, b.posinf_step), _first(a.neginf_step, b.neginf_step))


def _first(x: int | None, y: int | None) -> int | None:
    return y if x is None else x if y is None else min(x, y)


def extremes_of(chunk: Aggregate) -> list[Point]:
    """The points a chunk keeps: its minimum and maximum, and its first NaN, +Inf and -Inf."""
    kept = [(chunk.min_step, chunk.min_value), (chunk.max_step, chunk.max_value),
            (chunk.nan_step, math.nan), (chunk.posinf_step, math.inf), (chunk.neginf_step, -math.inf)]
    return [(step, value) for step, value in kept if step is not None and value is not None]


def downsample_rollups(chunks: Sequence[Aggregate], max_points: int) -> Downsampled:
    """Chunks in chunk order -> at most `max_points` points: consecutive chunks grouped into max_points // 2
    buckets, each keeping its minimum and maximum (in step order); NaN and infinities as markers, the first of
    each kind per bucket."""
    buckets = max(1, max_points // 2)
    per = math.ceil(len(chunks) / buckets) if chunks else 1
    points: list[Point] = []
    markers: list[Point] = []
    for start in range(0, len(chunks), per):
        group = merged(chunks[start:start + per])
        kept = {(s, v) for s, v in ((group.min_step, group.min_value), (group.max_step, group.max_value))
                if s is not None and v is not None}
        points.extend(sorted(kept))
        for step, value in ((group.nan_step, math.nan), (group.posinf_step, math.inf),
                            (group.neginf_step, -math.inf)):
            if step is not None:
                markers.append((step, value))
    markers.sort(key=lambda m: m[0])
    return Downsampled(points, markers, sum(c.count for c in chunks))


def merged(chunks: Iterable[Aggregate]) -> Aggregate:
    it = iter(chunks)
    out = next(it)
    for chunk in it:
        out = merge(out, replace(chunk, chunk=out.chunk))
    return out
