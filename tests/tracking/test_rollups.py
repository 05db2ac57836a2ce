"""Rollups: merged per batch they equal the aggregate of all points, and a long series read from them keeps
every extreme."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracking import selectors, services
from tracking.models import Rollup
from tracking.series.rollup import LEVEL_STEPS, aggregate, coarser, downsample_rollups, merge, merged

values = st.one_of(st.floats(min_value=-1e6, max_value=1e6), st.sampled_from([math.nan, math.inf, -math.inf]))
series_st = st.dictionaries(st.integers(0, 200_000), values, min_size=1, max_size=300).map(
    lambda d: sorted(d.items()))


def same(a, b) -> bool:
    """Aggregates equal, NaN-safe and with sums compared to rounding."""
    return (a.__class__ == b.__class__ and math.isclose(a.total, b.total, rel_tol=1e-9, abs_tol=1e-6)
            and {k: v for k, v in vars(a).items() if k != "total"} == {k: v for k, v in vars(b).items()
                                                                       if k != "total"})


@settings(max_examples=200, deadline=None)
@given(series_st, st.integers(1, 20))
def test_merging_the_aggregates_of_two_halves_equals_aggregating_all(points, cut):
    cut = len(points) * cut // 21
    whole = aggregate(points, 1024)
    first, second = aggregate(points[:cut], 1024), aggregate(points[cut:], 1024)
    for chunk, agg in whole.items():
        parts = [p[chunk] for p in (first, second) if chunk in p]
        assert same(merged(parts) if len(parts) > 1 else parts[0], agg)


@settings(max_examples=100, deadline=None)
@given(series_st)
def test_a_coarser_level_from_finer_chunks_equals_aggregating_the_points(points):
    direct = aggregate(points, LEVEL_STEPS[1])
    built = coarser(aggregate(points, LEVEL_STEPS[0]), LEVEL_STEPS[1] // LEVEL_STEPS[0])
    assert direct.keys() == built.keys() and all(same(direct[c], built[c]) for c in direct)


@settings(max_examples=100, deadline=None)
@given(series_st, st.integers(2, 60))
def test_downsampling_from_rollups_keeps_every_buckets_extremes(points, max_points):
    chunks = sorted(aggregate(points, 1024).values(), key=lambda a: a.chunk)
    result = downsample_rollups(chunks, max_points)
    assert len(result.points) <= max_points and result.total == len(points)
    per = math.ceil(len(chunks) / max(1, max_points // 2))
    for start in range(0, len(chunks), per):
        steps = {c.chunk for c in chunks[start:start + per]}
        finite = [(s, v) for s, v in points if s // 1024 in steps and math.isfinite(v)]
        if finite:
            assert min(v for _, v in finite) in {v for _, v in result.points}
            assert max(v for _, v in finite) in {v for _, v in result.points}
    assert all(math.isfinite(v) for _, v in result.points)
    assert {s for s, v in result.markers if math.isnan(v)} <= {s for s, v in points if math.isnan(v)}
    assert bool(result.markers) == any(not math.isfinite(v) for _, v in points)


def test_merge_keeps_the_earliest_step_of_equal_extremes():
    a, b = aggregate([(5, 1.0)], 1024)[0], aggregate([(3, 1.0)], 1024)[0]
    assert merge(a, b).min_step == merge(b, a).min_step == 3


@pytest.mark.django_db
def test_batches_in_any_order_leave_the_same_rollups(tenant):
    rng = random.Random(3)
    batches = [[{"key": "loss", "value": rng.gauss(0, 1), "step": s} for s in range(start, start + 3000)]
               for start in (0, 3000, 6000)]
    batches[1][5]["value"] = "NaN"

    def rollups_after(order):
        run = services.run_create(project=tenant.project)
        for i in order:
            services.run_log_batch(run_id=run.pk, metrics=batches[i])
        return sorted(tuple(getattr(r, f) for f in ["level", "chunk", *Rollup.AGGREGATE_FIELDS] if f != "total")
                      for r in Rollup.objects.filter(series__run=run))

    assert rollups_after([0, 1, 2]) == rollups_after([2, 0, 1])


@pytest.mark.django_db
@pytest.mark.parametrize("seed", range(4))
def test_the_stored_rollups_are_the_merge_of_each_batchs_aggregates(tenant, seed):
    """The upsert merges in SQL what rollup.merge merges in Python: batches meeting in the same chunks, with equal
    extremes at other steps, NaN and infinities, chunks where one batch has no finite value, and a batch logged
    again with other values."""
    rng = random.Random(seed)
    steps = list(range(3000))
    rng.shuffle(steps)
    pool = [1.0, 2.0, 3.0, -1.0, math.nan, math.inf, -math.inf]
    batches = [sorted((s, rng.choice(pool)) for s in steps[i::3]) for i in range(3)]
    batches.append([(s, 5.0) for s, _ in batches[2]])  # logged again, other values: the same last steps
    run = services.run_create(project=tenant.project)
    expected: dict[tuple[int, int], object] = {}
    for batch in batches:
        services.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "step": s, "value": "NaN" if v != v else
                                                        ("Infinity" if v == math.inf else "-Infinity" if v == -math.inf
                                                         else v)} for s, v in batch])
        chunks = aggregate(batch, LEVEL_STEPS[0])
        for level in range(len(LEVEL_STEPS)):
            if level:
                chunks = coarser(chunks, LEVEL_STEPS[level] // LEVEL_STEPS[level - 1])
            for chunk, agg in chunks.items():
                known = expected.get((level, chunk))
                expected[level, chunk] = agg if known is None else merge(known, agg)
    stored = {(r.level, r.chunk): r.as_aggregate() for r in Rollup.objects.filter(series__run=run)}
    assert stored.keys() == expected.keys()
    assert all(same(stored[key], expected[key]) for key in expected)


@pytest.mark.django_db
def test_a_long_series_is_read_from_rollups_with_its_spike_and_nan(tenant, monkeypatch):
    monkeypatch.setattr(selectors, "RAW_LIMIT", 1000)
    run = services.run_create(project=tenant.project)
    points = [{"key": "loss", "value": 1.0 + (s % 7) / 100, "step": s} for s in range(40_000)]
    points[23_456]["value"] = 99.0
    points[31_000]["value"] = "NaN"
    for start in range(0, 40_000, 10_000):
        services.run_log_batch(run_id=run.pk, metrics=points[start:start + 10_000])
    read = []
    monkeypatch.setattr(selectors, "full_series", lambda *a, **k: read.append(1) or [])
    result = selectors.series(run, "loss", max_points=40)
    assert not read  # nothing read raw
    assert len(result.points) <= 40 and result.total == 40_000
    assert (23_456, 99.0) in result.points
    assert [m[0] for m in result.markers] == [31_000] and math.isnan(result.markers[0][1])
    assert min(v for _, v in result.points) == 1.0
