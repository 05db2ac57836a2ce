"""The write path of points, the hottest in the product.

A batch's keys become series ids first (one SELECT, and an INSERT for new keys); then its points are upserted on
(series, step, attempt), so a retried batch changes nothing. On PostgreSQL new points are COPied straight into the
table, and a batch that meets points already there goes through a staging table and one INSERT ... SELECT ... ON
CONFLICT instead (a third slower, measured side by side); Django's bulk_create would spend ~30 us per row building
objects and SQL. On SQLite, one executemany upsert.
"""

from __future__ import annotations

from dataclasses import asdict

from django.db import connection, transaction
from django.db.models import Q
from psycopg.errors import UniqueViolation

from tracking.models import Point, Rollup, Series
from tracking.series.rollup import LEVEL_STEPS, Aggregate, aggregate_ordered, coarser, merge
from tracking.series.validate import Batch

_TABLE = Point._meta.db_table
_STAGING = "tracking_point_in"
_UPSERT = "ON CONFLICT (series_id, step, attempt) DO UPDATE SET timestamp = EXCLUDED.timestamp, value = EXCLUDED.value"


def series_ids(run_id: int, keys: set[str]) -> dict[str, int]:
    """The series of these keys of a run, created when new (the caller holds the run's row lock)."""
    found = dict(Series.objects.filter(run_id=run_id, key__in=keys).values_list("key", "id"))
    missing = keys - found.keys()
    if missing:
        Series.objects.bulk_create([Series(run_id=run_id, key=key) for key in missing])
        found.update(Series.objects.filter(run_id=run_id, key__in=missing).values_list("key", "id"))
    return found


def write_points(run_id: int, attempt: int, batch: Batch) -> None:
    """Upsert a batch's points (one per key and step: see validate.clean_points) inside the caller's transaction."""
    if not batch:
        return
    ids = series_ids(run_id, set(batch))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            _copy(cursor, copy_text(attempt, ids, batch))
        else:
            cursor.executemany(f"INSERT INTO {_TABLE} (attempt, series_id, step, timestamp, value) VALUES "  # noqa: S608
                               f"({int(attempt)}, %s, %s, %s, %s) {_UPSERT}", _rows(ids, batch))
    update_rollups(ids, batch)


def _rows(ids: dict[str, int], batch: Batch) -> list[tuple]:
    return [(ids[key], step, ts, None if value != value else value)  # NaN: NULL
            for key, group in batch.items() for step, ts, value in zip(*group, strict=True)]


def update_rollups(ids: dict[str, int], batch: Batch) -> None:
    """Merge the batch into the rollups of every chunk it touches, at every level (two statements)."""
    fresh: dict[tuple[int, int, int], Aggregate] = {}
    for key, group in batch.items():
        chunks = aggregate_ordered(group.steps, group.values, LEVEL_STEPS[0])
        for level, width in enumerate(LEVEL_STEPS):
            if level:
                chunks = coarser(chunks, width // LEVEL_STEPS[level - 1])
            fresh.update({(ids[key], level, chunk): agg for chunk, agg in chunks.items()})
    touched = Q()
    for series_id, level in {(s, lv) for s, lv, _ in fresh}:
        touched |= Q(series_id=series_id, level=level, chunk__in=[c for s, lv, c in fresh if (s, lv) == (
            series_id, level)])
    for row in Rollup.objects.filter(touched):
        key = (row.series_id, row.level, row.chunk)
        fresh[key] = merge(row.as_aggregate(), fresh[key])
    Rollup.objects.bulk_create(
        [Rollup(series_id=series_id, level=level, **asdict(agg)) for (series_id, level, _), agg in fresh.items()],
        update_conflicts=True, unique_fields=["series", "level", "chunk"], update_fields=Rollup.AGGREGATE_FIELDS)


_NULL = "\\N"
_COLUMNS = "(attempt, series_id, step, timestamp, value)"


def copy_text(attempt: int, ids: dict[str, int], batch: Batch) -> str:
    """The batch's rows in COPY's text format, built in one piece per key (a tenth of the CPU of writing them row
    by row). A float's repr is its shortest exact decimal, which PostgreSQL reads back to the same double; a NaN,
    stored as NULL, is `\\N` (a value's repr is the only column that can read `nan`)."""
    parts = []
    for key, group in batch.items():
        prefix = f"{int(attempt)}\t{ids[key]}\t"
        parts.append("".join([f"{prefix}{step}\t{ts}\t{value!r}\n" for step, ts, value in zip(*group, strict=True)]))
    return "".join(parts).replace("\tnan\n", f"\t{_NULL}\n")


def _copy(cursor, text: str) -> None:
    """New points (the common case) are COPied straight into the table, under a savepoint; when one exists already
    (a retried batch, an overlapping one) the COPY fails whole, is undone, and the batch is upserted instead."""
    try:
        with transaction.atomic(), cursor.connection.cursor().copy(f"COPY {_TABLE} {_COLUMNS} FROM STDIN") as copy:
            copy.write(text)
    except UniqueViolation:
        _copy_then_upsert(cursor, text)


def _copy_then_upsert(cursor, text: str) -> None:
    # The same COPY into a staging table, then one INSERT ... SELECT ... ON CONFLICT. The staging table lives as
    # long as the connection; ON COMMIT DELETE ROWS empties it with the transaction, and the DELETE below for the
    # next batch of the same one.
    cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} (attempt smallint, series_id bigint, step bigint, "
                   "timestamp bigint, value double precision) ON COMMIT DELETE ROWS")
    with cursor.connection.cursor().copy(f"COPY {_STAGING} {_COLUMNS} FROM STDIN") as copy:
        copy.write(text)
    cursor.execute(f"INSERT INTO {_TABLE} {_COLUMNS} SELECT attempt, series_id, step, timestamp, value "  # noqa: S608
                   f"FROM {_STAGING} {_UPSERT}")
    cursor.execute(f"DELETE FROM {_STAGING}")  # noqa: S608
