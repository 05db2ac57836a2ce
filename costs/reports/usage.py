"""Cost and usage reports: device-hours, CPU core-hours, memory GiB-hours and money, grouped by any of the segment's
dimensions, over a range of UTC days, optionally per hour, day, week or month. Besides the fixed dimensions a report
groups by any job label (`label:team`): segments and their days carry the job's labels, and a job without the label
is in the "(none)" group. An hourly report is priced from the segments themselves (days have no hours), so its range is
bounded (`TIDAL_COST_MAX_HOURLY_DAYS`).

A report adds two parts: the `UsageDay` rows of the range (closed segments, rolled and priced once) and the
segments not rolled yet (open ones up to now, and any closed since the last roll), priced here with the same code.
Rows come out of a generator, merged per key, so the CSV of a year streams in bounded memory: the unrolled part is
small and held, the rolled part is read in chunks."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from itertools import islice
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q, QuerySet, Sum, Value
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import TruncMonth, TruncWeek

from clusters.models import Cluster
from costs.metering.prices import price_book
from costs.metering.pricing import DAY, HOUR, PriceBook, Usage, day_pieces, hour_pieces
from costs.metering.rollup import EPOCH_DAY, usage_of
from costs.models import UsageDay, UsageSegment
from jobs.models import Job
from quotas.models import PriorityClass, ResourceFlavor
from tenancy.models import Organization, Project
from tracking.services import DEFAULT_EXPERIMENT

# What a report may group by, and the column of segments and days that holds it.
GROUPS: dict[str, str] = {
    "organization": "organization_id", "project": "project_id", "user": "user_id", "job": "job_id",
    "experiment": "experiment", "stage": "stage", "flavor": "flavor_id", "cluster": "cluster_id",
    "priority_class": "priority_class_id",
}
STEPS = ("hour", "day", "week", "month")
CHUNK = 2000
# A group `label:<key>` is the value of the job label <key>; jobs without it are in the NO_LABEL group.
LABEL_PREFIX = "label:"
NO_LABEL = "(none)"
CENT = Decimal("0.01")


def label_key(group: str) -> str | None:
    """The label key of a `label:<key>` group, else None (a fixed dimension)."""
    return group[len(LABEL_PREFIX):] if group.startswith(LABEL_PREFIX) else None


def column_of(group: str, index: int) -> str:
    """The column of segments and days (or, for a label, the annotation) that holds the group at `index`."""
    return f"label_{index}" if label_key(group) is not None else GROUPS[group]


@dataclass(frozen=True)
class Window:
    """UTC days from `start` up to, not including, `end`."""

    start: date
    end: date

    @property
    def start_ts(self) -> int:
        return (self.start - EPOCH_DAY).days * DAY

    @property
    def end_ts(self) -> int:
        return (self.end - EPOCH_DAY).days * DAY


@dataclass
class Row:
    """A report's row. Money is whole micro-units of the currency, added exactly; `cost` and `memory_cost` give it
    as an exact Decimal, for the edge (the API, CSV and page) to round once."""

    period: date | None
    keys: tuple[Any, ...]
    device_seconds: float = 0.0
    cpu_seconds: float = 0.0
    cost_micros: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    memory_seconds: float = 0.0  # MiB-seconds
    memory_cost_micros: int = 0  # the part of `cost_micros` memory cost

    def add(self, other: Row) -> None:
        self.device_seconds += other.device_seconds
        self.cpu_seconds += other.cpu_seconds
        self.memory_seconds += other.memory_seconds
        self.cost_micros += other.cost_micros
        self.memory_cost_micros += other.memory_cost_micros

    def add_piece(self, segment: Any, usage: Usage, start: int, end: int, book: PriceBook) -> None:
        """Add what `segment` (its `usage`) held and cost from `start` to `end`."""
        self.device_seconds += segment.devices * (end - start)
        self.cpu_seconds += segment.cpu_millis * (end - start) / 1000
        self.memory_seconds += segment.memory_mib * (end - start)
        cost, memory_cost = book.micros(usage, start, end)
        self.cost_micros += cost
        self.memory_cost_micros += memory_cost

    @property
    def cost(self) -> Decimal:
        return from_micros(self.cost_micros)

    @property
    def memory_cost(self) -> Decimal:
        return from_micros(self.memory_cost_micros)

    @property
    def device_hours(self) -> float:
        return self.device_seconds / HOUR

    @property
    def cpu_hours(self) -> float:
        return self.cpu_seconds / HOUR

    @property
    def memory_gib_hours(self) -> float:
        return self.memory_seconds / 1024 / HOUR


def from_micros(micros: int) -> Decimal:
    """Micro-units of the currency as an exact Decimal."""
    return Decimal(micros).scaleb(-6)


def money(amount: Decimal) -> Decimal:
    """An amount to the cent, halves away from zero: what the API, the CSV and the page show, rounded once there."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def period_of(day: date, step: str | None) -> date | None:
    """The period of a day (for an hourly step, see `hour_of`)."""
    if step == "week":
        return day - timedelta(days=day.weekday())
    if step == "month":
        return day.replace(day=1)
    return day if step == "day" else None


@dataclass(frozen=True)
class ReportQuery:
    window: Window
    group_by: Sequence[str] = ()
    step: str | None = None
    filters: Mapping[str, Any] = field(default_factory=dict)  # column -> id (or value)
    # The moment the report is as of (epoch seconds; None: now, when it is computed): a page and the CSV it links
    # to, computed a few moments apart, give the same figures when both are as of the page's moment.
    as_of: int | None = None

    @property
    def columns(self) -> list[str]:
        return [column_of(name, index) for index, name in enumerate(self.group_by)]

    def keys_of(self, segment: Any) -> tuple:
        """A segment's (or a row's with its field names) values of the groups."""
        keys = []
        for name in self.group_by:
            key = label_key(name)
            keys.append(getattr(segment, GROUPS[name]) if key is None else (segment.labels or {}).get(key))
        return tuple(keys)

    def moment(self, now: datetime) -> int:
        """The moment the report is as of (epoch seconds): `as_of`, else `now` to the second."""
        return int(now.timestamp()) if self.as_of is None else self.as_of


def rolled_values(projects: QuerySet, query: ReportQuery, late: Late | None = None) -> QuerySet:
    """The rolled part of a report, one aggregate query: (group columns..., period when stepped, device-seconds,
    CPU core-seconds, memory MiB-seconds, cost, memory cost) in period order; without the days of `late` segments
    from its first day on."""
    days = UsageDay.objects.filter(day__gte=query.window.start, day__lt=query.window.end,
                                   project_id__in=projects, **query.filters)
    if late and late.segments:
        days = days.exclude(day__gte=late.first_day, segment_id__in=late.segments)
    labels = {column: KeyTextTransform(label_key(name), "labels")
              for name, column in zip(query.group_by, query.columns, strict=True) if label_key(name) is not None}
    if labels:
        days = days.annotate(**labels)
    names = list(query.columns)
    if query.step == "day":
        names.append("day")
    elif query.step:
        days = days.annotate(period=(TruncWeek if query.step == "week" else TruncMonth)("day"))
        names.append("period")
    if not names:  # totals only: values() of no field would group by every column, a constant groups nothing
        days, names = days.annotate(everything=Value(0)), ["everything"]
    return (days.values(*names).annotate(ds=Sum("device_seconds"), cs=Sum("cpu_seconds"), ms=Sum("memory_seconds"),
                                         money=Sum("cost_micros"), mmoney=Sum("memory_cost_micros"))
            .order_by(*names[len(query.columns):], *query.columns)
            .values_list(*names, "ds", "cs", "ms", "money", "mmoney"))


@dataclass(frozen=True)
class Late:
    """Segments rolled after the moment a report is as of, that held time after it (they ended, or started, after
    it): their days from the moment's day on hold that time, so the report leaves those days out and prices the
    segments themselves from that day up to the moment instead."""

    first_day: date
    segments: frozenset[int]

    @property
    def first_ts(self) -> int:
        return (self.first_day - EPOCH_DAY).days * DAY


def late_segments(projects: QuerySet, query: ReportQuery, as_of: int) -> Late:
    """One query over the rolled days from the moment's day to the window's end (a day or so for a page's moment),
    joined to their segments."""
    first = EPOCH_DAY + timedelta(days=as_of // DAY)
    found = (UsageDay.objects.filter(day__gte=max(first, query.window.start), day__lt=query.window.end,
                                     project_id__in=projects, segment__end_ts__gt=as_of, **query.filters)
             .values_list("segment_id", flat=True).distinct())
    return Late(first, frozenset(found) if first < query.window.end else frozenset())


def _rolled(projects: QuerySet, query: ReportQuery, late: Late | None) -> Iterator[Row]:
    width = len(query.columns)
    for values in rolled_values(projects, query, late).iterator(chunk_size=CHUNK):
        device, cpu, memory, money, memory_money = values[-5:]
        if device is None:  # the totals of no day at all
            continue
        period = values[width] if query.step else None
        if isinstance(period, datetime):
            period = period.date()
        # int(): PostgreSQL's SUM of a bigint is a numeric (a Decimal here), SQLite's an integer.
        yield Row(period, tuple(values[:width]), device or 0, cpu or 0, int(money or 0),
                  memory_seconds=memory or 0, memory_cost_micros=int(memory_money or 0))


def _unrolled(projects: QuerySet, query: ReportQuery, moment: int, late: Late | None) -> dict[tuple, Row]:
    """The segments not rolled yet (and the `late` ones from their first day on), clipped to the window and to the
    report's moment, per (period, keys)."""
    start, end = query.window.start_ts, min(query.window.end_ts, moment)
    unrolled = Q(rolled=False) | Q(pk__in=late.segments) if late and late.segments else Q(rolled=False)
    segments = (UsageSegment.objects.filter(unrolled, start_ts__lt=end, project_id__in=projects, **query.filters)
                .filter(Q(end_ts__isnull=True) | Q(end_ts__gt=start)))
    book = price_book()
    found: dict[tuple, Row] = {}
    for segment in segments:
        usage, keys = usage_of(segment), query.keys_of(segment)
        since = max(start, late.first_ts) if late and segment.pk in late.segments else start
        first, last = max(segment.start_ts, since), min(segment.end_ts or end, end)
        # Cut at midnights and priced a day at a time, as the rollup does: each day's money is rounded to the
        # micro-unit as its UsageDay's is, so a report is the same, to the micro-unit, before and after a roll.
        for day, a, b in day_pieces(first, last):
            period = period_of(EPOCH_DAY + timedelta(days=day), query.step)
            found.setdefault((period, keys), Row(period, keys)).add_piece(segment, usage, a, b, book)
    return found


def report_rows(projects: QuerySet, query: ReportQuery, now: datetime) -> Iterator[Row]:
    """Every row of the report as of `query.as_of` (else `now`), labelled, rolled rows in period order and then what
    only unrolled segments hold."""
    moment = query.moment(now)
    if query.step == "hour":
        yield from _labelled(iter(_hourly(projects, query, moment)), query.group_by)
        return
    late = None if query.as_of is None else late_segments(projects, query, moment)
    pending = _unrolled(projects, query, moment, late)

    def merged() -> Iterator[Row]:
        for row in _rolled(projects, query, late):
            extra = pending.pop((row.period, row.keys), None)
            if extra is not None:
                row.add(extra)
            yield row
        yield from sorted(pending.values(), key=lambda r: (r.period or EPOCH_DAY, -r.cost_micros))

    yield from _labelled(merged(), query.group_by)


def _labelled(rows: Iterator[Row], group_by: Sequence[str]) -> Iterator[Row]:
    while chunk := list(islice(rows, CHUNK)):
        _label(chunk, group_by)
        yield from chunk


def hour_of(at: int) -> datetime:
    return datetime.fromtimestamp(at - at % 3600, UTC)


def _hourly(projects: QuerySet, query: ReportQuery, moment: int) -> list[Row]:
    """An hourly report, from the segments overlapping the window whether rolled or not (a rolled day has no
    hours), each cut at the hours and priced as a roll prices it (prices in force or past never change). The range
    is bounded by the serializer (`TIDAL_COST_MAX_HOURLY_DAYS`), so this reads a few days of segments."""
    start, end = query.window.start_ts, min(query.window.end_ts, moment)
    segments = (UsageSegment.objects.filter(start_ts__lt=end, project_id__in=projects, **query.filters)
                .filter(Q(end_ts__isnull=True) | Q(end_ts__gt=start)))
    book = price_book()
    found: dict[tuple, Row] = {}
    for segment in segments:
        usage, keys = usage_of(segment), query.keys_of(segment)
        first, last = max(segment.start_ts, start), min(segment.end_ts or end, end)
        for a, b in hour_pieces(first, last):
            period = hour_of(a)
            found.setdefault((period, keys), Row(period, keys)).add_piece(segment, usage, a, b, book)
    return sorted(found.values(), key=lambda r: (r.period, -r.cost_micros))


def _label(rows: Sequence[Row], group_by: Sequence[str]) -> None:
    for index, name in enumerate(group_by):
        if label_key(name) is not None:
            for row in rows:
                row.labels[name] = NO_LABEL if row.keys[index] is None else str(row.keys[index])
            continue
        ids = {row.keys[index] for row in rows}
        names = LABELS[name](ids) if name in LABELS else {}
        for row in rows:
            key = row.keys[index]
            row.labels[name] = names.get(key, "") if name in LABELS else (key or UNNAMED.get(name, ""))


def _of_ids(model, ids: set) -> QuerySet:
    """`model`'s rows of these ids. On PostgreSQL the ids travel as one array parameter: a block's 2,000 job ids as
    2,000 placeholders cost the driver ~20 ms to parse, a quarter of the time of a year's CSV per job."""
    pks = [pk for pk in ids if pk is not None]
    if connection.vendor == "postgresql":
        return model.objects.filter(pk__in=RawSQL("SELECT unnest(%s::bigint[])", [pks]))
    return model.objects.filter(pk__in=pks)


def _names(model, field: str) -> Any:
    return lambda ids: dict(_of_ids(model, ids).values_list("pk", field))


# What an empty value of a column that is not an id stands for: usage from before segments named the experiment
# of a job that names none (tracking's default experiment, where its run is).
UNNAMED = {"experiment": DEFAULT_EXPERIMENT}

LABELS = {
    "organization": _names(Organization, "name"),
    "project": _names(Project, "slug"),
    "user": _names(get_user_model(), "username"),
    "job": lambda ids: {pk: f"#{pk} {name}" for pk, name in
                        _of_ids(Job, ids).values_list("pk", "name")},
    "flavor": _names(ResourceFlavor, "name"),
    "cluster": _names(Cluster, "name"),
    "priority_class": _names(PriorityClass, "name"),
}


@dataclass
class Report:
    query: ReportQuery
    rows: list[Row]

    @property
    def total(self) -> Row:
        total = Row(None, ())
        for row in self.rows:
            total.add(row)
        return total


def usage_report(projects: QuerySet, query: ReportQuery, now: datetime) -> Report:
    return Report(query, list(report_rows(projects, query, now)))


def job_costs(until_by_job: Mapping[int, int | None], now: datetime) -> dict[int, float]:
    """What each job's segments cost from its first admission up to its `until` (epoch seconds; None: now), in one
    query: the run and experiment pages, and the cost to reach a metric value. Added exactly; a float only as
    tracking's hook (`tracking.costing.JobCosts`) takes it."""
    book, current, micros = price_book(), int(now.timestamp()), dict.fromkeys(until_by_job, 0)
    for segment in UsageSegment.objects.filter(job_id__in=list(until_by_job)):
        limit = until_by_job[segment.job_id] or current
        if segment.start_ts < limit:
            micros[segment.job_id] += book.micros(usage_of(segment), segment.start_ts,
                                                  min(segment.end_ts or current, limit, current))[0]
    return {job: float(from_micros(amount)) for job, amount in micros.items()}
