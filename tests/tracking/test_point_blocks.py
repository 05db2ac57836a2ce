"""Points stored in blocks: a batch that meets stored points is merged with the blocks it overlaps, so a point stays
identified by (series, step, attempt) and the blocks of a series and attempt never overlap."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tracking import points, services
from tracking.models import PointBlock
from tracking.points import Block, latest, merged, stored_points
from tracking.selectors import full_series

pytestmark = pytest.mark.django_db


def block(attempt: int, steps: list[int], value: float) -> Block:
    return Block(1, attempt, np.array(steps, dtype=np.int64), np.array(steps, dtype=np.int64) + 1000,
                 np.full(len(steps), value))


def log(run, steps, value: float, attempt: int | None = None) -> None:
    """Log as the process of job attempt `attempt` would (its run token's), else as a user."""
    services.run_log_batch(run_id=run.pk, token_attempt=attempt,
                           metrics=[{"key": "loss", "value": value, "step": s, "timestamp": s} for s in steps])


def stored_blocks(run) -> list[tuple[int, int, int, int]]:
    return list(PointBlock.objects.filter(series__run=run).order_by("attempt", "first_step")
                .values_list("attempt", "first_step", "last_step", "count"))


@pytest.mark.django_db(False)
def test_merging_keeps_one_point_a_step_the_latest_blocks():
    out = merged([block(1, [0, 2, 4], 1.0), block(1, [1, 2, 5], 2.0)])
    assert out.steps.tolist() == [0, 1, 2, 4, 5]
    assert out.values.tolist() == [1.0, 2.0, 2.0, 1.0, 2.0] and out.timestamps.tolist() == [1000, 1001, 1002,
                                                                                            1004, 1005]


@pytest.mark.django_db(False)
def test_reading_takes_the_newest_attempt_of_a_step_and_the_range_asked():
    steps, timestamps, values = latest([block(1, [0, 1, 2, 3], 1.0), block(2, [2, 3, 4], 2.0)], min_step=1)
    assert steps.tolist() == [1, 2, 3, 4] and values.tolist() == [1.0, 2.0, 2.0, 2.0]
    assert timestamps.tolist() == [1001, 1002, 1003, 1004]


def test_a_batch_over_two_stored_blocks_replaces_its_steps_and_keeps_the_rest(run):
    log(run, range(0, 100), 1.0)
    log(run, range(100, 200), 2.0)
    log(run, range(50, 150), 3.0)
    series = dict(full_series(run, "loss"))
    assert len(series) == 200 and len(stored_points(run.pk)) == 200
    assert series[49] == 1.0 and series[50] == series[149] == 3.0 and series[150] == 2.0
    assert stored_blocks(run) == [(1, 0, 199, 200)]


def test_a_continued_series_adds_a_block_of_its_own(run):
    log(run, range(0, 100), 1.0)
    log(run, range(100, 200), 2.0)
    assert stored_blocks(run) == [(1, 0, 99, 100), (1, 100, 199, 100)]


def test_an_overlapping_block_is_split_at_the_largest_block(run, monkeypatch):
    monkeypatch.setattr(points, "MAX_BLOCK", 30)
    log(run, range(0, 100), 1.0)
    log(run, range(90, 110), math.nan)
    found = stored_blocks(run)
    assert [count for *_, count in found] == [30, 30, 30, 20]
    assert all(a[2] < b[1] for a, b in itertools.pairwise(found))  # disjoint, in step order
    series = full_series(run, "loss")
    assert [s for s, _ in series] == list(range(110)) and all(math.isnan(v) for _, v in series[90:])


def test_attempts_keep_blocks_of_their_own(run):
    log(run, range(0, 10), 1.0)
    log(run, range(5, 15), 2.0, attempt=2)
    assert stored_blocks(run) == [(1, 0, 9, 10), (2, 5, 14, 10)]
    assert [p.value for p in stored_points(run.pk) if p.step == 7] == [1.0, 2.0]


def test_a_batch_continuing_its_series_looks_up_no_stored_blocks_and_an_overlapping_one_does(run):
    """The run's summary, read under its row lock, says each key's highest stored step: beyond it nothing stored
    overlaps, so the lookup is skipped; a batch reaching back (a retry, a late attempt's points) still merges."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def lookups(steps: range) -> int:
        with CaptureQueriesContext(connection) as captured:
            services.run_log_batch(run_id=run.pk, metrics=[{"key": k, "value": float(s), "step": s}
                                                           for k in ("a", "b") for s in steps])
        return sum("FROM tracking_pointblock WHERE attempt" in q["sql"] for q in captured.captured_queries)

    assert lookups(range(0, 10)) == 1  # new keys: looked up
    assert lookups(range(10, 20)) == 0  # continuing both
    assert lookups(range(15, 25)) == 1  # reaching back: merged
    assert [p.step for p in stored_points(run.pk) if p.key == "a"] == list(range(25))


def test_a_batch_reaching_back_into_a_long_series_reads_the_blocks_around_its_steps(run):
    """A late batch (a spooled one delivered after an outage, a retry) is merged with the stored blocks it overlaps.
    They were looked up by last step at least the batch's first and first step at most its last. With statistics of
    the table from before the series grew (autovacuum analyzes a growing table now and then), PostgreSQL took few
    blocks to end past the batch's first step and went through the index on the last step: in the middle of a
    series it read the half after the batch (3,120 blocks a series of a 3,000-batch run: 11 ms of PostgreSQL where a
    continuing batch costs 2). An attempt's blocks never overlap, so only the last block begun before the batch's
    first step can reach into it: the rest are found by first step, the primary key's order."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("counts the rows PostgreSQL's index scans fetched")

    def fetched() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables "
                           "WHERE relname = 'tracking_pointblock'")
            return cursor.fetchone()[0]

    for start in range(0, 3000, 10):
        if start == 300:
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE tracking_pointblock")
        log(run, range(start, start + 10), 1.0)
    before = fetched()
    log(run, range(1505, 1526), 2.0)  # over the blocks begun at 1500, 1510 and 1520, mid-series
    assert fetched() - before < 40
    series = dict(full_series(run, "loss"))
    assert series[1504] == 1.0 and series[1505] == series[1525] == 2.0 and series[1526] == 1.0 and len(series) == 3000
    assert [b[1:3] for b in stored_blocks(run) if 1490 <= b[1] <= 1530] == [(1490, 1499), (1500, 1529), (1530, 1539)]
