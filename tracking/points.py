"""The write path of points, the hottest in the product.

A batch's keys become series ids first (one SELECT, and an INSERT for new keys); then its points are upserted on
(series, step, attempt), so a retried batch changes nothing. On PostgreSQL new points are COPied straight into the
table, and a batch that meets points already there goes through a staging table and one INSERT ... SELECT ... ON
CONFLICT instead (a third slower, measured side by side); Django's bulk_create would spend ~30 us per row building
objects and SQL. On SQLite, one executemany upsert.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
from django.db import connection, transaction
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
            _copy(cursor, copy_rows(attempt, ids, batch))
        else:
            cursor.executemany(f"INSERT INTO {_TABLE} (attempt, series_id, step, timestamp, value) VALUES "  # noqa: S608
                               f"({int(attempt)}, %s, %s, %s, %s) {_UPSERT}", _rows(ids, batch))
    update_rollups(ids, batch)


def _rows(ids: dict[str, int], batch: Batch) -> list[tuple]:
    return [(ids[key], step, ts, None if value != value else value)  # NaN: NULL
            for key, group in batch.items() for step, ts, value in zip(*group, strict=True)]


def update_rollups(ids: dict[str, int], batch: Batch) -> None:
    """Merge the batch into the rollups of every chunk it touches, at every level: one SELECT of those chunks and
    one multi-row upsert, in plain SQL (some forty rows a batch; the ORM spent more building them than the
    database storing them)."""
    fresh: dict[tuple[int, int, int], Aggregate] = {}
    for key, group in batch.items():
        chunks = aggregate_ordered(group.steps, group.values, LEVEL_STEPS[0])
        for level, width in enumerate(LEVEL_STEPS):
            if level:
                chunks = coarser(chunks, width // LEVEL_STEPS[level - 1])
            fresh.update({(ids[key], level, chunk): agg for chunk, agg in chunks.items()})
    names = ", ".join(connection.ops.quote_name(name) for name in _ROLLUP_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {names} FROM {_ROLLUPS} WHERE (series_id, level, chunk) IN "  # noqa: S608
                       f"({', '.join(['(%s, %s, %s)'] * len(fresh))})", [part for key in fresh for part in key])
        for series_id, level, *stored in cursor.fetchall():
            key = (series_id, level, stored[0])
            fresh[key] = merge(Aggregate(*stored), fresh[key])
        updates = ", ".join(f"{name} = EXCLUDED.{name}" for name in map(connection.ops.quote_name, _AGGREGATE))
        rows = ", ".join([f"({', '.join(['%s'] * len(_ROLLUP_COLUMNS))})"] * len(fresh))
        cursor.execute(f"INSERT INTO {_ROLLUPS} ({names}) VALUES {rows} ON CONFLICT (series_id, level, chunk) "  # noqa: S608
                       f"DO UPDATE SET {updates}",
                       [value for (series_id, level, _), agg in fresh.items()
                        for value in (series_id, level, *(getattr(agg, name) for name in _AGGREGATE))])


_ROLLUPS = Rollup._meta.db_table
_AGGREGATE = [field.name for field in fields(Aggregate)]  # "chunk" first, as Aggregate() takes them
_ROLLUP_COLUMNS = ["series_id", "level", *_AGGREGATE]
_COLUMNS = "(attempt, series_id, step, timestamp, value)"


# A row of PostgreSQL's binary COPY format: the number of fields, then each field's length and its big-endian
# value (attempt smallint, series_id, step and timestamp bigint, value double precision), in _COLUMNS' order. A row
# whose value is NaN (stored as NULL) has the length -1 and no value.
_ROW = np.dtype([("fields", ">i2"), ("attempt_length", ">i4"), ("attempt", ">i2"), ("series_length", ">i4"),
                 ("series", ">i8"), ("step_length", ">i4"), ("step", ">i8"), ("ts_length", ">i4"), ("ts", ">i8"),
                 ("value_length", ">i4"), ("value", ">f8")])
_NULL_ROW = np.dtype([(name, _ROW.fields[name][0]) for name in _ROW.names[:-1]])
_LENGTHS = {"fields": 5, "attempt_length": 2, "series_length": 8, "step_length": 8, "ts_length": 8, "value_length": 8}
_BINARY = "FROM STDIN (FORMAT BINARY)"
_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # the signature, no flags, no header extension
_TRAILER = b"\xff\xff"


def copy_rows(attempt: int, ids: dict[str, int], batch: Batch) -> bytes:
    """The batch's rows in COPY's binary format, built as one numpy array of fixed-size rows: a third of the CPU of
    formatting them as text, and PostgreSQL reads the numbers without parsing decimals (a sixth less of its CPU
    for the COPY). A NaN is written as NULL; infinities as such."""
    groups = batch.values()
    values = np.concatenate([np.asarray(group.values, dtype=float) for group in groups])
    rows = np.empty(len(values), dtype=_ROW)
    for name, length in _LENGTHS.items():
        rows[name] = length
    rows["attempt"] = attempt
    rows["series"] = np.repeat([ids[key] for key in batch], [len(group.steps) for group in groups])
    rows["step"] = np.concatenate([np.asarray(group.steps, dtype=np.int64) for group in groups])
    rows["ts"] = np.concatenate([np.asarray(group.timestamps, dtype=np.int64) for group in groups])
    rows["value"] = values
    nan = np.isnan(values)
    if not nan.any():
        return _HEADER + rows.tobytes() + _TRAILER
    nulls = np.empty(int(nan.sum()), dtype=_NULL_ROW)
    for name in _NULL_ROW.names:
        nulls[name] = rows[name][nan]
    nulls["value_length"] = -1
    return _HEADER + rows[~nan].tobytes() + nulls.tobytes() + _TRAILER


def _copy(cursor, rows: bytes) -> None:
    """New points (the common case) are COPied straight into the table, under a savepoint; when one exists already
    (a retried batch, an overlapping one) the COPY fails whole, is undone, and the batch is upserted instead."""
    try:
        with transaction.atomic(), cursor.connection.cursor().copy(f"COPY {_TABLE} {_COLUMNS} {_BINARY}") as copy:
            copy.write(rows)
    except UniqueViolation:
        _copy_then_upsert(cursor, rows)


def _copy_then_upsert(cursor, rows: bytes) -> None:
    # The same COPY into a staging table, then one INSERT ... SELECT ... ON CONFLICT. The staging table lives as
    # long as the connection; ON COMMIT DELETE ROWS empties it with the transaction, and the DELETE below for the
    # next batch of the same one.
    cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} (attempt smallint, series_id bigint, step bigint, "
                   "timestamp bigint, value double precision) ON COMMIT DELETE ROWS")
    with cursor.connection.cursor().copy(f"COPY {_STAGING} {_COLUMNS} {_BINARY}") as copy:
        copy.write(rows)
    cursor.execute(f"INSERT INTO {_TABLE} {_COLUMNS} SELECT attempt, series_id, step, timestamp, value "  # noqa: S608
                   f"FROM {_STAGING} {_UPSERT}")
    cursor.execute(f"DELETE FROM {_STAGING}")  # noqa: S608
