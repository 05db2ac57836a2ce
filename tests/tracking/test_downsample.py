"""Downsampling never hides an extreme: every bucket's minimum and maximum survive, non-finite values come back as
markers, and the result never exceeds the asked number of points."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tracking.series.downsample import downsample

values = st.one_of(st.floats(min_value=-1e6, max_value=1e6), st.just(math.nan), st.just(math.inf),
                   st.just(-math.inf))


@st.composite
def series(draw):
    steps = sorted(set(draw(st.lists(st.integers(0, 100_000), min_size=1, max_size=400))))
    return [(s, draw(values)) for s in steps]


def buckets_of(points, max_points):
    n = max_points // 2
    first, last = points[0][0], points[-1][0]
    width = (last - first + 1) / n
    out: dict[int, list] = {}
    for step, value in points:
        out.setdefault(min(n - 1, int((step - first) / width)), []).append((step, value))
    return out


@settings(max_examples=300, deadline=None)
@given(series(), st.integers(2, 120))
def test_every_bucket_keeps_its_extremes_and_every_kind_of_non_finite_value(points, max_points):
    result = downsample(points, max_points)
    assert len(result.points) <= max(max_points, 0) and result.total == len(points)
    kept = set(result.points)
    marked = {(s, math.copysign(1, v) if math.isinf(v) else 0) for s, v in result.markers if not math.isnan(v)}
    nan_steps = {s for s, v in result.markers if math.isnan(v)}
    groups = buckets_of(points, max_points) if len(points) > max_points else {0: points}
    for bucket in groups.values():
        finite = [p for p in bucket if math.isfinite(p[1])]
        if finite:
            assert min(p[1] for p in finite) in {v for s, v in kept if s in {q[0] for q in bucket}}
            assert max(p[1] for p in finite) in {v for s, v in kept if s in {q[0] for q in bucket}}
        if any(math.isnan(v) for _, v in bucket):
            assert nan_steps & {s for s, _ in bucket}
        for sign in (1, -1):
            if any(v == sign * math.inf for _, v in bucket):
                assert any(s in {q[0] for q in bucket} and m == sign for s, m in marked)
    assert [s for s, _ in result.points] == sorted(s for s, _ in result.points)


def test_a_short_series_comes_back_whole():
    points = [(0, 1.0), (1, math.nan), (2, 0.5)]
    result = downsample(points, 10)
    assert result.points == [(0, 1.0), (2, 0.5)] and len(result.markers) == 1


def test_a_one_step_spike_in_a_million_points_survives():
    points = [(i, 1.0) for i in range(1_000_000)]
    points[777_777] = (777_777, 1e9)
    result = downsample(points, 2000)
    assert (777_777, 1e9) in result.points and len(result.points) <= 2000

