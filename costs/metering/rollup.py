"""Closed segments, cut at UTC midnights and priced, become `UsageDay` rows (a beat task and an embedded loop).

Only closed segments are rolled, and only with prices whose dates have passed: history is never edited
(`costs.services`), so a rolled day is final. Reports add the segments not rolled yet (open ones, costed to now, and
those closed since the last run), so a report is the same before and after a roll."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils import timezone

from costs.metering.prices import price_book
from costs.metering.pricing import PriceBook, Usage, day_pieces
from costs.models import UsageDay, UsageSegment
from jobs.bulk import bulk_set

EPOCH_DAY = date(1970, 1, 1)
# What a day copies from its segment, and a day's columns in the order rows are written.
COPIED = ("organization_id", "project_id", "user_id", "job_id", "experiment", "stage", "flavor_id", "cluster_id",
          "priority_class_id", "outcome")
DAY_COLUMNS = ("segment_id", "day", *COPIED, "labels", "device_seconds", "cpu_seconds", "memory_seconds",
               "cost_micros", "memory_cost_micros")


def usage_of(segment: Any) -> Usage:
    """What a segment (a model instance or a row with its field names) holds, as pricing takes it."""
    return Usage(segment.flavor_id, segment.cluster_id, segment.priority_class_id, segment.devices,
                 segment.cpu_millis, segment.memory_mib, segment.tidal_devices)


def day_rows(segment: Any, book: PriceBook) -> Iterator[tuple]:
    """The segment's piece inside each UTC day, priced: rows in DAY_COLUMNS order."""
    usage, copied = usage_of(segment), tuple(getattr(segment, column) for column in COPIED)
    # The labels as JSON text (COPY and SQLite parse it): read as text by `roll_segments`, not parsed and dumped
    # again (7 us a segment, a third of what labels and memory added to a roll).
    labels = getattr(segment, "labels_json", None) or json.dumps(segment.labels or {}, separators=(",", ":"))
    adapt = connection.ops.adapt_datefield_value
    for day, start, end in day_pieces(segment.start_ts, segment.end_ts):
        cost, memory_cost = book.micros(usage, start, end)
        yield (segment.id, adapt(EPOCH_DAY + timedelta(days=day)), *copied, labels, segment.devices * (end - start),
               round(segment.cpu_millis * (end - start) / 1000), segment.memory_mib * (end - start), cost, memory_cost)


def _write_days(rows: list[tuple]) -> None:
    """Days never exist before their segment is rolled (its row is locked and unrolled), so a plain write: COPY on
    PostgreSQL, several times faster than INSERT for a backlog; one INSERT per row elsewhere."""
    table, columns = UsageDay._meta.db_table, ", ".join(DAY_COLUMNS)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        elif rows:
            marks = ", ".join(["%s"] * len(DAY_COLUMNS))
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)  # noqa: S608


def roll_segments(batch: int = 5000, now: datetime | None = None) -> int:
    """Roll up to `batch` closed segments; returns how many. A segment whose end is still ahead (an ended attempt's
    grace, `costs.metering.segments`) waits for it: a rolled day is final, and reports cost no time after now.
    Segments are read as plain rows, not models: a backlog of a million rolls at about 20,000 a second
    (bench/bench_costs.py)."""
    book, until = price_book(), int((now or timezone.now()).timestamp())
    with transaction.atomic():
        segments = list(UsageSegment.objects.select_for_update(skip_locked=True)
                        .filter(rolled=False, end_ts__isnull=False, end_ts__lte=until).order_by("start_ts")
                        .annotate(labels_json=Cast("labels", TextField()))
                        .values_list("id", "start_ts", "end_ts", "devices", "cpu_millis", "memory_mib", "tidal_devices",
                                     "labels_json",
                                     *COPIED, named=True)[:batch])
        _write_days([row for segment in segments for row in day_rows(segment, book)])
        bulk_set(UsageSegment, ["rolled"], [(segment.id, True) for segment in segments])
    return len(segments)
