"""Downsampling that never hides an extreme.

A chart asks for at most `max_points` points of a series. The steps are cut into max_points // 2 buckets of equal
width, and each bucket keeps its smallest and its largest finite value (in step order), so a loss spike one step
wide survives any zoom level. Non-finite values (NaN, +Inf, -Inf) are not points of the line: they come back as
markers, the first of each kind in each bucket, so a NaN is never averaged away nor drawn as a cliff.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Point = tuple[int, float]  # (step, value); NaN is float("nan")


@dataclass(frozen=True)
class Downsampled:
    points: list[Point]  # finite values, step order, at most max_points
    markers: list[Point]  # non-finite values (NaN, +/-Inf), step order, at most one per kind per bucket
    total: int  # points in the series before downsampling


def kind_of(value: float) -> str:
    """"nan", "inf", "-inf" or "" (finite)."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return ""


def downsample(series: Sequence[Point], max_points: int) -> Downsampled:
    """`series` in step order; `max_points` >= 2."""
    if max_points < 2:
        raise ValueError("max_points must be at least 2")
    if len(series) <= max_points:
        return Downsampled([p for p in series if math.isfinite(p[1])],
                           [p for p in series if not math.isfinite(p[1])], len(series))
    buckets = max_points // 2
    first, last = series[0][0], series[-1][0]
    width = (last - first + 1) / buckets
    points: list[Point] = []
    markers: list[Point] = []
    current = -1
    lo = hi = None
    seen: set[str] = set()
    for step, value in series:
        b = min(buckets - 1, int((step - first) / width))
        if b != current:
            _flush(points, lo, hi)
            current, lo, hi, seen = b, None, None, set()
        kind = kind_of(value)
        if kind:
            if kind not in seen:
                seen.add(kind)
                markers.append((step, value))
            continue
        if lo is None or value < lo[1]:
            lo = (step, value)
        if hi is None or value > hi[1]:
            hi = (step, value)
    _flush(points, lo, hi)
    return Downsampled(points, markers, len(series))


def _flush(points: list[Point], lo: Point | None, hi: Point | None) -> None:
    if lo is None or hi is None:
        return
    if lo[0] == hi[0]:
        points.append(lo)
    else:
        points.extend(sorted((lo, hi)))

