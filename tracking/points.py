"""The write path of points, the hottest in the product.

A batch's keys become series ids first (one SELECT, and an INSERT for new keys); then its points are upserted on
(series, step, attempt), so a retried batch changes nothing. On PostgreSQL new points are COPied straight into the
table, and a batch that meets points already there goes through a staging table and one INSERT ... SELECT ... ON
CONFLICT instead (a third slower, measured side by side); Django's bulk_create would spend ~30 us per row building
objects and SQL. On SQLite, one executemany upsert.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from django.db import connection, transaction
from django.db.models import Q
from psycopg.errors import UniqueViolation

from tracking.models import Point, Rollup, Series
from tracking.series.rollup import LEVEL_STEPS, Aggregate, aggregate, coarser, merge
from tracking.series.validate import CleanPoint

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


def write_points(run_id: int, attempt: int, points: Sequence[CleanPoint]) -> None:
    """Upsert `points` (unique on key and step: see validate.clean_points) inside the caller's transaction."""
    if not points:
        return
    ids = series_ids(run_id, {p.key for p in points})
    rows = [(ids[p.key], p.step, p.timestamp, None if p.value != p.value else p.value) for p in points]  # NaN: NULL
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            _copy(cursor, attempt, rows)
        else:
            cursor.executemany(f"INSERT INTO {_TABLE} (attempt, series_id, step, timestamp, value) VALUES "  # noqa: S608
                               f"({int(attempt)}, %s, %s, %s, %s) {_UPSERT}", rows)
    update_rollups(ids, points)


def update_rollups(ids: dict[str, int], points: Sequence[CleanPoint]) -> None:
    """Merge the batch into the rollups of every chunk it touches, at every level (three statements)."""
    by_series: dict[int, list[tuple[int, float]]] = {}
    for p in points:
        by_series.setdefault(ids[p.key], []).append((p.step, p.value))
    fresh: dict[tuple[int, int, int], Aggregate] = {}
    for series_id, series_points in by_series.items():
        chunks = aggregate(series_points, LEVEL_STEPS[0])
        for level, width in enumerate(LEVEL_STEPS):
            if level:
                chunks = coarser(chunks, width // LEVEL_STEPS[level - 1])
            fresh.update({(series_id, level, chunk): agg for chunk, agg in chunks.items()})
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


def copy_text(attempt: int, rows: list[tuple]) -> str:
    """Rows in COPY's text format, written in one piece: a tenth of the CPU of writing them row by row. A float's
    repr is its shortest exact decimal, which PostgreSQL reads back to the same double; NULL is `\\N`."""
    prefix = f"{int(attempt)}\t"
    return "".join(f"{prefix}{sid}\t{step}\t{ts}\t{_NULL if value is None else repr(value)}\n"
                   for sid, step, ts, value in rows)


def _copy(cursor, attempt: int, rows: list[tuple]) -> None:
    """New points (the common case) are COPied straight into the table, under a savepoint; when one exists already
    (a retried batch, an overlapping one) the COPY fails whole, is undone, and the batch is upserted instead."""
    try:
        with transaction.atomic(), cursor.connection.cursor().copy(
                f"COPY {_TABLE} (attempt, series_id, step, timestamp, value) FROM STDIN") as copy:
            copy.write(copy_text(attempt, rows))
    except UniqueViolation:
        _copy_then_upsert(cursor, attempt, rows)


def _copy_then_upsert(cursor, attempt: int, rows: list[tuple]) -> None:
    # COPY costs the web worker a third of the CPU of passing the rows as arrays to INSERT ... unnest(), for the
    # same time in PostgreSQL (measured side by side). The staging table lives as long as the connection; ON COMMIT
    # DELETE ROWS empties it with the transaction, and the DELETE below for the next batch of the same one.
    cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} (series_id bigint, step bigint, timestamp bigint, "
                   "value double precision) ON COMMIT DELETE ROWS")
    with cursor.connection.cursor().copy(f"COPY {_STAGING} (series_id, step, timestamp, value) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    cursor.execute(f"INSERT INTO {_TABLE} (attempt, series_id, step, timestamp, value) SELECT %s, series_id, step, "  # noqa: S608
                   f"timestamp, value FROM {_STAGING} {_UPSERT}", [attempt])
    cursor.execute(f"DELETE FROM {_STAGING}")  # noqa: S608
