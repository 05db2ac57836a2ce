"""The write path of points, the hottest in the product, and the reading of stored points.

Points are stored in blocks (tracking.models.PointBlock): a batch's points of one key and attempt, as three packed
arrays. A batch's keys become series ids first (read with the run's lock, locked_run, and an INSERT for new keys);
one SELECT then finds the stored blocks of the same series and attempt whose steps the batch overlaps (skipped when
it continues its series, the common case); those are merged with the batch's points (the batch's win on a step both
hold, so a retried batch changes nothing) and replaced; and the blocks are written, on PostgreSQL with one INSERT of
one array a column (the byte arrays bound as binary), on SQLite with one executemany. Then the rollups of the
chunks the batch touched, in plain SQL.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import fields
from functools import cache, reduce
from typing import NamedTuple

import numpy as np
import orjson
import psycopg
from django.db import connection
from django.db.models import Q

from tracking.models import PointBlock, Rollup, Run, Series
from tracking.series.rollup import LEVEL_STEPS, Aggregate, aggregate_ordered, coarser
from tracking.series.validate import MAX_POINTS, Batch, KeyPoints

MAX_BLOCK = MAX_POINTS  # points in a block at most: a batch's points of a key fit one
_STEP = np.dtype("<i8")  # steps and timestamps (ms) as stored
_VALUE = np.dtype("<f8")


class Block(NamedTuple):
    """One series' points of one attempt, in step order, one a step."""

    series_id: int
    attempt: int
    steps: np.ndarray  # int64
    timestamps: np.ndarray  # int64, ms
    values: np.ndarray  # float64


class StoredPoint(NamedTuple):
    key: str
    step: int
    attempt: int
    timestamp: int
    value: float


def series_ids(run_id: int, keys: set[str]) -> dict[str, int]:
    """The series of these keys of a run, created when new (the caller holds the run's row lock)."""
    found = dict(Series.objects.filter(run_id=run_id, key__in=keys).values_list("key", "id"))
    return {**found, **_created_series(run_id, keys - found.keys())}


def _created_series(run_id: int, keys: set[str]) -> dict[str, int]:
    """The series of these keys, which the caller did not find: created, or read when a batch committed them since
    the caller's lookup (locked_run's may predate it: an upsert that leaves an existing series be)."""
    if not keys:
        return {}
    Series.objects.bulk_create([Series(run_id=run_id, key=key) for key in keys], ignore_conflicts=True)
    return dict(Series.objects.filter(run_id=run_id, key__in=keys).values_list("key", "id"))


def locked_run(run_id: int, keys: Iterable[str]) -> tuple[Run | None, dict[str, int]]:
    """The run's row, locked until the caller's transaction ends (None: no such run), and the ids of those of `keys`
    whose series it has: one statement, written out rather than built by the ORM, where the lock and the lookup
    were two queries whose building cost a fifth of a 1,000-point batch's CPU, and a round trip more.

    On PostgreSQL the lookup reads the snapshot the statement began with: a series created by the batch whose lock
    this one waited for may be missing from it. write_points reads or creates what is missing (_created_series)."""
    run_table, series_table = (connection.ops.quote_name(model._meta.db_table) for model in (Run, Series))
    given: list[str] | str
    if connection.vendor == "postgresql":
        found, keys_in, lock, given = "json_object_agg(key, id)", "= ANY(%s)", " FOR UPDATE OF r", list(keys)
    else:  # SQLite: a batch's 10,000 keys as one JSON parameter, not one each; its writers are serialized anyway
        found, keys_in, lock = "json_group_object(key, id)", "IN (SELECT value FROM json_each(%s))", ""
        given = orjson.dumps(list(keys)).decode()
    rows = list(Run.objects.raw(
        f"SELECT r.*, f.series_found FROM {run_table} r LEFT JOIN (SELECT run_id, {found} AS series_found "  # noqa: S608
        f"FROM {series_table} WHERE run_id = %s AND key {keys_in} GROUP BY run_id) f ON f.run_id = r.id "
        f"WHERE r.id = %s{lock}", [run_id, given, run_id]))
    if not rows:
        return None, {}
    run = rows[0]
    ids = run.series_found
    return run, orjson.loads(ids) if isinstance(ids, str | bytes) else dict(ids or {})


# Keys written by one set of statements: a batch may hold 10,000 keys, and SQLite refuses an expression over 1,000
# deep (the overlap lookup's OR of one term per key).
KEYS_PER_PART = 100


def value_arrays(batch: Batch) -> dict[str, np.ndarray]:
    """Each key's values as float64, converted once for the stored blocks and the anomaly checks: unboxing a Python
    float costs some 26 ns, a 10,000-point batch's values a quarter of a millisecond each time."""
    return {key: np.asarray(group.values, dtype=float) for key, group in batch.items()}


def write_points(run_id: int, attempt: int, batch: Batch, highest: Mapping[str, int] | None = None,
                 known: Mapping[str, int] | None = None, arrays: Mapping[str, np.ndarray] | None = None) -> Batch:
    """Upsert a batch's points (one per key and step: see validate.clean_points) inside the caller's transaction,
    which holds the run's row lock: batches of a run are written one at a time, a wide one in parts of keys.

    `known`: series ids of the batch's keys the caller read under the lock (locked_run); the others are looked up.
    `highest`: per key, the highest step the run has stored (of any attempt: its summary's, read under the same
    lock). When every key of a part starts beyond it, no stored block can overlap and the lookup of overlapped
    blocks is skipped: one round trip of the ten a batch costs, the common case of training continuing its series.
    `arrays`: the batch's value_arrays, when the caller has them.

    Returns the batch without the points that were stored already, with the same value (a retried batch's): what
    the anomaly checks have not judged yet. A batch that continues its series is returned as it is."""
    keys = list(batch)
    new: Batch = {}
    for i in range(0, len(keys), KEYS_PER_PART):
        new.update(_write_part(run_id, attempt, {key: batch[key] for key in keys[i:i + KEYS_PER_PART]},
                               highest or {}, known, arrays or {}))
    return new


def _continues(batch: Batch, highest: Mapping[str, int]) -> bool:
    return all(key in highest and highest[key] < group.steps[0] for key, group in batch.items())


def _write_part(run_id: int, attempt: int, batch: Batch, highest: Mapping[str, int],
                known: Mapping[str, int] | None, arrays: Mapping[str, np.ndarray]) -> Batch:
    if known is None:
        ids = series_ids(run_id, set(batch))
    else:
        ids = {key: known[key] for key in batch if key in known}
        ids.update(_created_series(run_id, batch.keys() - ids.keys()))
    fresh = {ids[key]: Block(ids[key], attempt, np.asarray(group.steps, dtype=np.int64),
                             np.asarray(group.timestamps, dtype=np.int64),
                             arrays[key] if key in arrays else np.asarray(group.values, dtype=float))
             for key, group in batch.items()}
    met = {} if _continues(batch, highest) else _overlapped(attempt, fresh)
    stored: dict[int, np.ndarray] = {}  # per series met, which of the batch's points were stored as they are
    if met:
        for (series_id, _), block in met.items():
            stored[series_id] = stored.get(series_id, False) | _stored_as_is(fresh[series_id], block)
        PointBlock.objects.filter(reduce(operator.or_, (Q(series_id=series_id, first_step=first)
                                                        for series_id, first in met)), attempt=attempt).delete()
        for (series_id, _), block in met.items():
            fresh[series_id] = merged([block, fresh[series_id]])
    _store([part for block in fresh.values() for part in _split(block)], _rollup_rows(ids, batch))
    new = {key: _without(group, stored[ids[key]]) if ids[key] in stored else group for key, group in batch.items()}
    return {key: group for key, group in new.items() if group.steps}


def _stored_as_is(new: Block, old: Block) -> np.ndarray:
    """Which points of `new` the stored block `old` holds at the same step with the same value (NaN as NaN)."""
    where = np.minimum(np.searchsorted(old.steps, new.steps), len(old.steps) - 1)
    same_step = old.steps[where] == new.steps
    values = old.values[where]
    return same_step & ((values == new.values) | (np.isnan(values) & np.isnan(new.values)))


def _without(group: KeyPoints, drop: np.ndarray) -> KeyPoints:
    keep = np.flatnonzero(~drop).tolist()
    return KeyPoints._make([column[i] for i in keep] for column in group)


def _overlapped(attempt: int, fresh: dict[int, Block]) -> dict[tuple[int, int], Block]:
    """The stored blocks of these series and attempt whose steps the new blocks' overlap, by (series, first step).
    An attempt's blocks never overlap, so of those begun before a new block's first step only the last can reach
    into it: the rest begin within its steps. Both are found by first step alone, the primary key's order, which
    the planner takes with the table's statistics however stale (by first and last step, statistics from before a
    series grew sent a late batch through the index on the last step: it read the half of the series after it);
    the one begun before that ends before is dropped here. Plain SQL: the ORM spent a millisecond building this
    query."""
    begun_before = (f"SELECT first_step FROM {_BLOCKS} WHERE series_id = %s AND attempt = %s "  # noqa: S608
                    "AND first_step < %s ORDER BY first_step DESC LIMIT 1")
    reach = " OR ".join([f"(series_id = %s AND first_step <= %s AND first_step >= COALESCE(({begun_before}), %s))"]
                        * len(fresh))
    names = ", ".join(connection.ops.quote_name(name) for name in ("series_id", "first_step", *_ARRAYS))
    bounds = [(series_id, int(block.steps[0]), int(block.steps[-1])) for series_id, block in fresh.items()]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {names} FROM {_BLOCKS} WHERE attempt = %s AND ({reach})",  # noqa: S608
                       [attempt, *(bound for series_id, first, last in bounds
                                   for bound in (series_id, last, series_id, attempt, first, first))])
        rows = cursor.fetchall()
    found = {(series_id, first): _decoded(series_id, attempt, *arrays) for series_id, first, *arrays in rows}
    starts = {series_id: first for series_id, first, _ in bounds}
    return {key: block for key, block in found.items() if block.steps[-1] >= starts[key[0]]}


def merged(blocks: list[Block]) -> Block:
    """Blocks of one series and attempt as one, in step order; of points at one step, the one of the latest block
    in `blocks` is kept."""
    steps = np.concatenate([block.steps for block in blocks])
    order = np.argsort(steps, kind="stable")  # equal steps keep the order of `blocks`
    steps = steps[order]
    last = np.append(steps[1:] != steps[:-1], True)  # the last point of each step
    return Block(blocks[0].series_id, blocks[0].attempt, steps[last],
                 np.concatenate([block.timestamps for block in blocks])[order][last],
                 np.concatenate([block.values for block in blocks])[order][last])


def _split(block: Block) -> list[Block]:
    return [Block(block.series_id, block.attempt, block.steps[i:i + MAX_BLOCK], block.timestamps[i:i + MAX_BLOCK],
                  block.values[i:i + MAX_BLOCK]) for i in range(0, len(block.steps), MAX_BLOCK)]


_BLOCKS = PointBlock._meta.db_table
_ARRAYS = ["steps", "timestamps", "values"]
_BLOCK_COLUMNS = ["series_id", "attempt", "first_step", "last_step", "count", "min_timestamp", "max_timestamp",
                  *_ARRAYS]


def _store(blocks: list[Block], rollups: list[tuple]) -> None:
    """Insert the blocks and merge their rollups into the stored ones (as rollup.merge does: a SELECT of the stored
    ones and a merge in Python cost a round trip and a millisecond more).

    On PostgreSQL each is one statement of one array a column, the same statement every batch: the blocks' byte
    arrays bound as they are (binary parameters; as text each would be spelled out in hex), where a COPY took two
    round trips; the rollups' some forty rows, which spelled as rows were 640 parameters that the driver split out
    of the statement's text again every time (a tenth of a 1,000-point batch's CPU). On SQLite an executemany and a
    multi-row upsert."""
    rows = [(block.series_id, block.attempt, int(block.steps[0]), int(block.steps[-1]), len(block.steps),
             int(block.timestamps.min()), int(block.timestamps.max()), block.steps.astype(_STEP).tobytes(),
             block.timestamps.astype(_STEP).tobytes(), block.values.astype(_VALUE).tobytes()) for block in blocks]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # A cursor binding its parameters server-side (Django's binds them into the statement's text); its
            # errors are turned into Django's, as the API answers an unreachable database with a 503.
            with connection.wrap_database_errors, psycopg.Cursor(cursor.connection) as binding:
                binding.execute(_insert_arrays_sql(), [list(column) for column in zip(*rows, strict=True)])
            cursor.execute(_upsert_arrays_sql(), [list(column) for column in zip(*rollups, strict=True)])
            return
        names = ", ".join(connection.ops.quote_name(name) for name in _BLOCK_COLUMNS)
        cursor.executemany(f"INSERT INTO {_BLOCKS} ({names}) VALUES "  # noqa: S608
                           f"({', '.join(['%s'] * len(_BLOCK_COLUMNS))})", rows)
        values = ", ".join([f"({', '.join(['%s'] * len(_ROLLUP_COLUMNS))})"] * len(rollups))
        cursor.execute(f"INSERT INTO {_ROLLUPS} ({', '.join(_ROLLUP_COLUMNS)}) VALUES {values} "  # noqa: S608
                       f"ON CONFLICT (series_id, level, chunk) DO UPDATE SET {_MERGE}",
                       [value for row in rollups for value in row])


def _decoded(series_id: int, attempt: int, steps: bytes, timestamps: bytes, values: bytes) -> Block:
    return Block(series_id, attempt, np.frombuffer(steps, dtype=_STEP), np.frombuffer(timestamps, dtype=_STEP),
                 np.frombuffer(values, dtype=_VALUE))


def read_blocks(series: Iterable[int], *, min_step: int | None = None, max_step: int | None = None,
                min_timestamp: int | None = None, before_timestamp: int | None = None) -> Iterator[Block]:
    """The stored blocks of these series holding points in the step range (inclusive) or the time range (ms,
    half-open), by series, attempt and step, read 100 at a time (at most 24 MB; a series logged in small batches
    has many small blocks); their points outside the ranges are the caller's to drop."""
    rows = PointBlock.objects.filter(series_id__in=list(series))
    if min_step is not None:
        rows = rows.filter(last_step__gte=min_step)
    if max_step is not None:
        rows = rows.filter(first_step__lte=max_step)
    if min_timestamp is not None:
        rows = rows.filter(max_timestamp__gte=min_timestamp)
    if before_timestamp is not None:
        rows = rows.filter(min_timestamp__lt=before_timestamp)
    found = rows.order_by("series_id", "attempt", "first_step").values_list(
        "series_id", "attempt", "steps", "timestamps", "values")
    return (_decoded(*row) for row in found.iterator(chunk_size=100))


def page_blocks(series_id: int, attempt: int, first_step: int, points: int,
                last_step: int | None = None) -> list[Block]:
    """One attempt's blocks of a series holding its next `points` points from `first_step` on (up to `last_step`;
    fewer at its end), in step order. The blocks' step ranges are read first, through the index on (series, attempt,
    last_step): an attempt's blocks never overlap, so by last step is in step order. Then the arrays of just those
    blocks, so a page of a long series costs the blocks it spans, not the series."""
    rows = PointBlock.objects.filter(series_id=series_id, attempt=attempt, last_step__gte=first_step)
    if last_step is not None:
        rows = rows.filter(first_step__lte=last_step)
    counted, through = 0, None
    for start, end, count in rows.order_by("last_step").values_list("first_step", "last_step", "count").iterator(
            chunk_size=2_000):
        through = end
        if start >= first_step:  # a block begun before `first_step` holds an unknown part of its points after it
            counted += count
        if counted >= points:
            break
    if through is None:
        return []
    found = rows.filter(last_step__lte=through).order_by("last_step").values_list(
        "series_id", "attempt", "steps", "timestamps", "values")
    return [_decoded(*row) for row in found]


def latest(blocks: Iterable[Block], min_step: int | None = None,
           max_step: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps, timestamps and values of one series' blocks in step order, within the step range (inclusive); of a
    step stored by several attempts, the newest attempt's (a job resumed from a checkpoint logs its steps again)."""
    blocks = list(blocks)
    if not blocks:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=float)
    steps = np.concatenate([block.steps for block in blocks])
    attempts = np.concatenate([np.full(len(block.steps), block.attempt) for block in blocks])
    order = np.lexsort((attempts, steps))  # by step, then attempt
    steps = steps[order]
    keep = np.append(steps[1:] != steps[:-1], True)  # the newest attempt of each step
    if min_step is not None:
        keep &= steps >= min_step
    if max_step is not None:
        keep &= steps <= max_step
    return (steps[keep], np.concatenate([block.timestamps for block in blocks])[order][keep],
            np.concatenate([block.values for block in blocks])[order][keep])


def finite_before(series_id: int, attempt: int, step: int, count: int) -> list[float]:
    """The last `count` finite values of a series' attempt logged at steps before `step`, oldest first: the
    baseline of points that arrived after later ones (tracking.alerts). The blocks of a series and attempt never
    overlap, so they are read from the one before `step` backwards, a few at a time, until `count` are found."""
    found: list[np.ndarray] = []
    total = 0
    blocks = (PointBlock.objects.filter(series_id=series_id, attempt=attempt, first_step__lt=step)
              .order_by("-first_step").values_list("steps", "values"))
    for steps, values in blocks.iterator(chunk_size=8):
        steps, values = np.frombuffer(steps, dtype=_STEP), np.frombuffer(values, dtype=_VALUE)
        keep = values[(steps < step) & np.isfinite(values)]
        found.append(keep)
        total += len(keep)
        if total >= count:
            break
    return np.concatenate(found[::-1])[-count:].tolist() if found else []


def stored_points(run_id: int) -> list[StoredPoint]:
    """Every stored point of a run, each attempt's, by key, attempt and step: what consistency checks read."""
    keys = dict(Series.objects.filter(run_id=run_id).values_list("id", "key"))
    return [StoredPoint(keys[block.series_id], step, block.attempt, timestamp, value)
            for block in read_blocks(keys) for step, timestamp, value in zip(
                block.steps.tolist(), block.timestamps.tolist(), block.values.tolist(), strict=True)]


def _rollup_rows(ids: dict[str, int], batch: Batch) -> list[tuple]:
    """The batch's aggregate of every chunk it touches, at every level (some forty rows a batch), which the upsert
    merges with the stored one as rollup.merge does (a SELECT of the stored ones and a merge in Python cost a round
    trip and a millisecond more)."""
    fresh: dict[tuple[int, int, int], Aggregate] = {}
    for key, group in batch.items():
        chunks = aggregate_ordered(group.steps, group.values, LEVEL_STEPS[0])
        for level, width in enumerate(LEVEL_STEPS):
            if level:
                chunks = coarser(chunks, width // LEVEL_STEPS[level - 1])
            fresh.update({(ids[key], level, chunk): agg for chunk, agg in chunks.items()})
    return [(series_id, level, *(getattr(agg, name) for name in _AGGREGATE))
            for (series_id, level, _), agg in fresh.items()]


_ROLLUPS = Rollup._meta.db_table
_AGGREGATE = [field.name for field in fields(Aggregate)]  # "chunk" first, as Aggregate() takes them
_ROLLUP_COLUMNS = ["series_id", "level", *_AGGREGATE]


def _merge_sql() -> str:
    """rollup.merge(stored, new) as the SET of an upsert: `t` the stored row, `n` the batch's (EXCLUDED). Of equal
    extremes the stored one stays, as merge keeps its first argument's."""
    t, n = f"{_ROLLUPS}.", "EXCLUDED."
    newer_last = f"{n}last_step >= {t}last_step"
    lower = (f"{n}min_value IS NOT NULL AND ({t}min_value IS NULL OR {n}min_value < {t}min_value OR "
             f"({n}min_value = {t}min_value AND {n}min_step < {t}min_step))")
    higher = (f"{n}max_value IS NOT NULL AND ({t}max_value IS NULL OR {n}max_value > {t}max_value OR "
              f"({n}max_value = {t}max_value AND {n}max_step < {t}max_step))")

    def pick(column: str, condition: str) -> str:
        return f"{column} = CASE WHEN {condition} THEN {n}{column} ELSE {t}{column} END"

    def first(column: str) -> str:  # the lower step of the two, either may be NULL
        return pick(column, f"{t}{column} IS NULL OR {n}{column} < {t}{column}")

    return ", ".join([
        f"count = {t}count + {n}count", pick("first_step", f"{n}first_step < {t}first_step"),
        pick("last_step", newer_last), pick("last_value", newer_last), f"finite = {t}finite + {n}finite",
        f"total = {t}total + {n}total", pick("min_step", lower), pick("min_value", lower),
        pick("max_step", higher), pick("max_value", higher), first("nan_step"), first("posinf_step"),
        first("neginf_step")])


_MERGE = _merge_sql()


def _arrays(model: type[PointBlock | Rollup], columns: list[str], binary: frozenset[str] = frozenset()) -> str:
    """unnest()'s arguments: a parameter a column, cast to an array of the column's type (%b: bound as binary)."""
    return ", ".join(f"{'%b' if name in binary else '%s'}::{model._meta.get_field(name).db_type(connection)}[]"
                     for name in columns)


@cache  # built on first use: the column types are the database's
def _insert_arrays_sql() -> str:
    names = ", ".join(connection.ops.quote_name(name) for name in _BLOCK_COLUMNS)
    return (f"INSERT INTO {_BLOCKS} ({names}) "  # noqa: S608
            f"SELECT * FROM unnest({_arrays(PointBlock, _BLOCK_COLUMNS, frozenset(_ARRAYS))})")


@cache
def _upsert_arrays_sql() -> str:
    """The rollups' upsert on PostgreSQL, its rows as one array per column."""
    return (f"INSERT INTO {_ROLLUPS} ({', '.join(_ROLLUP_COLUMNS)}) "  # noqa: S608
            f"SELECT * FROM unnest({_arrays(Rollup, _ROLLUP_COLUMNS)}) "
            f"ON CONFLICT (series_id, level, chunk) DO UPDATE SET {_MERGE}")
