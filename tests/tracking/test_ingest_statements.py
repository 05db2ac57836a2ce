"""What a batch costs the database: the run's lock and its series' ids are one statement, and a series that
statement missed (created by the batch whose lock it waited for) is read, not created twice."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from tracking import points, services
from tracking.models import Series
from tracking.points import stored_points
from tracking.series.validate import KeyPoints

pytestmark = pytest.mark.django_db


def metrics(keys, steps) -> list[dict]:
    return [{"key": key, "value": float(step), "step": step, "timestamp": step} for key in keys for step in steps]


def test_a_batch_continuing_its_series_reads_the_run_and_its_series_in_one_statement(run):
    services.run_log_batch(run_id=run.pk, metrics=metrics(["loss", "lr"], range(10)))
    with CaptureQueriesContext(connection) as queries:
        services.run_log_batch(run_id=run.pk, metrics=metrics(["loss", "lr"], range(10, 20)))
    reads = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
    assert len(reads) == 1 and "tracking_series" in reads[0] and "tracking_run" in reads[0], reads
    assert sorted(p.step for p in stored_points(run.pk) if p.key == "lr") == list(range(20))


def test_a_series_the_lookup_missed_is_read_not_created_again(run):
    """locked_run's lookup may predate a series another batch committed while this one waited for the lock: the
    write then finds it (a second series of the key, or a refused insert, would break the run)."""
    services.run_log_batch(run_id=run.pk, metrics=metrics(["loss"], range(5)))
    series = Series.objects.get(run=run, key="loss")
    batch = {"loss": KeyPoints([5, 6], [5, 6], [5.0, 6.0])}
    with transaction.atomic():
        locked, known = points.locked_run(run.pk, ["loss", "new"])
        assert locked.pk == run.pk and known == {"loss": series.pk}
        points.write_points(run.pk, 1, batch, {"loss": 4}, known={})  # as if the lookup had missed "loss"
    assert Series.objects.filter(run=run).count() == 1
    assert [p.step for p in stored_points(run.pk)] == [0, 1, 2, 3, 4, 5, 6]


def test_no_run_no_series(run):
    with transaction.atomic():
        assert points.locked_run(run.pk + 1000, ["loss"]) == (None, {})
        assert points.locked_run(run.pk, []) == (run, {})


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_bringing_the_same_new_keys_share_their_series(run):
    """Four senders log batches that each bring the same new keys at once: the batches queued behind the first
    lock miss its series in their lookup (read before the lock was granted) and must find them, not fail."""
    if connection.vendor != "postgresql":
        pytest.skip("concurrency is tested on PostgreSQL (CI sets DATABASE_URL); SQLite serializes all writers")
    senders, rounds = 4, 5
    barrier = threading.Barrier(senders)
    errors: list[BaseException] = []

    def sender(index: int) -> None:
        try:
            for round_no in range(rounds):
                barrier.wait()
                steps = range(1000 * round_no + 100 * index, 1000 * round_no + 100 * index + 50)
                services.run_log_batch(run_id=run.pk, metrics=metrics([f"k{round_no}-{i}" for i in range(3)], steps))
        except BaseException as error:  # surfaced below: a thread's failure must fail the test
            errors.append(error)
            barrier.abort()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert Series.objects.filter(run=run).count() == rounds * 3
    stored = stored_points(run.pk)
    assert len(stored) == rounds * 3 * senders * 50
    assert np.all(np.array([p.value for p in stored]) == np.array([p.step for p in stored]))
