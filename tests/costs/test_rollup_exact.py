"""A report is exact whether its segments are rolled or not: `usage_report` over random segments (open ones, ones
across midnights and across price changes, of devices or of CPU only, with memory or not, labelled or not,
preemptible or not) and random prices equals a direct computation with the pure pricing code, before and after
`roll_segments`, for any groups (a job label too) and step (hourly too).

The direct computation shares no code with the rollup or the reports but `PriceBook.cost` itself: it builds the
price book from the drawn prices (not from the database), and prices each segment's whole stretch inside a period in
one call (the rollup cuts at every midnight and adds the days up)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.models import Cluster
from costs.metering.pricing import DAY, PriceBook, Usage
from costs.metering.rollup import EPOCH_DAY, roll_segments
from costs.models import ClassDiscount, CpuPrice, DevicePrice, MemoryPrice, TidalRate, UsageDay, UsageSegment
from costs.reports.usage import GROUPS, ReportQuery, Window, label_key, period_of, usage_report
from jobs.models import Job
from quotas.models import PriorityClass, ResourceFlavor
from tenancy.models import Project

pytestmark = pytest.mark.django_db
T0 = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())
HORIZON = 12 * DAY  # segments and prices fall in the 12 days from T0 (a price may come a day before)
NOW = T0 + HORIZON + 3600
COLUMNS = ("project_id", "job_id", "flavor_id", "cluster_id", "priority_class_id", "devices", "cpu_millis",
           "start_ts", "end_ts")


@pytest.fixture
def world(tenant):
    flavors = [ResourceFlavor.objects.create(name=name, vendor="nvidia", device_resource="nvidia.com/gpu")
               for name in ("h100", "a100")]
    clusters = [Cluster.objects.create(name=name) for name in ("east", "west")]
    jobs = [Job.objects.create(project=tenant.project, submitter_name="x", name=f"j{i}", image="i",
                               flavor=flavors[0], priority_class=PriorityClass.objects.get(name="normal"),
                               submitted_at=datetime.fromtimestamp(T0, UTC), queued_at=datetime.fromtimestamp(T0, UTC))
            for i in range(3)]
    return {"projects": [tenant.project, tenant.other_project], "flavors": [f.pk for f in flavors],
            "clusters": [c.pk for c in clusters], "jobs": [j.pk for j in jobs],
            "classes": [PriorityClass.objects.get(name=name).pk for name in ("normal", "preemptible")]}


moments = st.integers(T0 - DAY, T0 + HORIZON)
amounts = st.decimals(min_value=0, max_value=50, places=2)


@st.composite
def prices(draw):
    """Timelines: per flavor (and for one flavor on one cluster), the CPU core-hour, the preemptible factor, the
    tidal factor."""
    def timeline(values) -> list[tuple[int, Decimal]]:
        return sorted(draw(st.dictionaries(moments, values, max_size=3)).items())

    return {"device": [timeline(amounts) for _ in range(2)], "own": timeline(amounts), "cpu": timeline(amounts),
            "discount": timeline(st.decimals(min_value=0, max_value=1, places=2)),
            "memory": [timeline(amounts) for _ in range(2)], "memory_own": timeline(amounts),
            "tidal": timeline(st.decimals(min_value=0, max_value=1, places=2))}


@st.composite
def segments(draw):
    start = draw(st.integers(T0, T0 + HORIZON))
    length = draw(st.one_of(st.integers(0, 600), st.integers(0, 3 * DAY)))
    open_ = draw(st.booleans())
    return {"project": draw(st.integers(0, 1)), "job": draw(st.sampled_from([None, 0, 1, 2])),
            "flavor": draw(st.integers(0, 1)), "cluster": draw(st.sampled_from([None, 0, 1])),
            "klass": draw(st.integers(0, 1)), "devices": (devices := draw(st.sampled_from([0, 1, 3, 8]))),
            "tidal": draw(st.integers(0, devices)),  # of them on capacity a pool lent
            "cpu_millis": draw(st.integers(0, 64_000)), "memory_mib": draw(st.sampled_from([0, 1024, 16384, 100_000])),
            "team": draw(st.sampled_from([None, "a", "b"])),
            "start_ts": start, "end_ts": None if open_ else min(start + length, NOW)}


@st.composite
def queries(draw):
    first = draw(st.dates(date(2025, 12, 30), date(2026, 1, 16)))
    days = draw(st.integers(1, 40))
    group_by = draw(st.lists(st.sampled_from(["project", "job", "flavor", "cluster", "priority_class", "label:team"]),
                             unique=True, max_size=3))
    step = draw(st.sampled_from([None, "day", "week", "month", "hour"]))
    if step == "hour":  # bounded by the serializer to a few days
        days = min(days, 3)
    return ReportQuery(Window(first, first + timedelta(days=days)), tuple(group_by), step)


def store(world, drawn_prices, drawn_segments) -> tuple[PriceBook, list[dict]]:
    """The drawn prices and segments as rows, and the price book as pure data, built here from the draw."""
    def when(ts: int) -> datetime:
        return datetime.fromtimestamp(ts, UTC)

    flavors, h100_east = world["flavors"], (world["flavors"][0], world["clusters"][0])
    book = {"device": {}, "cpu": [], "discount": {}}
    for flavor, line in zip(flavors, drawn_prices["device"], strict=True):
        DevicePrice.objects.bulk_create(DevicePrice(flavor_id=flavor, per_device_hour=v, effective_from=when(t))
                                        for t, v in line)
        book["device"][flavor, None] = [(t, float(v)) for t, v in line]
    DevicePrice.objects.bulk_create(DevicePrice(flavor_id=h100_east[0], cluster_id=h100_east[1], per_device_hour=v,
                                                effective_from=when(t)) for t, v in drawn_prices["own"])
    book["device"][h100_east] = [(t, float(v)) for t, v in drawn_prices["own"]]
    CpuPrice.objects.bulk_create(CpuPrice(per_core_hour=v, effective_from=when(t)) for t, v in drawn_prices["cpu"])
    book["cpu"] = [(t, float(v)) for t, v in drawn_prices["cpu"]]
    preemptible = world["classes"][1]
    ClassDiscount.objects.bulk_create(ClassDiscount(priority_class_id=preemptible, factor=v, effective_from=when(t))
                                      for t, v in drawn_prices["discount"])
    book["discount"][preemptible] = [(t, float(v)) for t, v in drawn_prices["discount"]]
    book["memory"] = {}
    for flavor, line in zip(flavors, drawn_prices["memory"], strict=True):
        MemoryPrice.objects.bulk_create(MemoryPrice(flavor_id=flavor, per_gib_hour=v, effective_from=when(t))
                                        for t, v in line)
        book["memory"][flavor, None] = [(t, float(v)) for t, v in line]
    MemoryPrice.objects.bulk_create(MemoryPrice(flavor_id=h100_east[0], cluster_id=h100_east[1], per_gib_hour=v,
                                                effective_from=when(t)) for t, v in drawn_prices["memory_own"])
    book["memory"][h100_east] = [(t, float(v)) for t, v in drawn_prices["memory_own"]]
    TidalRate.objects.bulk_create(TidalRate(factor=v, effective_from=when(t)) for t, v in drawn_prices["tidal"])
    book["tidal"] = [(t, float(v)) for t, v in drawn_prices["tidal"]]
    rows = []
    for s in drawn_segments:
        project = world["projects"][s["project"]]
        row = {"project_id": project.pk, "job_id": None if s["job"] is None else world["jobs"][s["job"]],
               "flavor_id": flavors[s["flavor"]],
               "cluster_id": None if s["cluster"] is None else world["clusters"][s["cluster"]],
               "priority_class_id": world["classes"][s["klass"]], "devices": s["devices"],
               "cpu_millis": s["cpu_millis"], "memory_mib": s["memory_mib"], "tidal_devices": s["tidal"],
               "labels": {} if s["team"] is None else {"team": s["team"], "other": "x"},
               "start_ts": s["start_ts"], "end_ts": s["end_ts"]}
        UsageSegment.objects.create(attempt_number=1, organization_id=project.organization_id, stage="other", **row)
        rows.append(row)
    return PriceBook(device=book["device"], cpu=book["cpu"], discount=book["discount"], memory=book["memory"],
                     tidal=book["tidal"]), rows


def key_of(row: dict, name: str) -> object:
    key = label_key(name)
    return row[GROUPS[name]] if key is None else row["labels"].get(key)


def expected(book: PriceBook, rows: list[dict], query: ReportQuery) -> dict:
    """(period, keys) -> [device-seconds, CPU core-seconds, cost, memory MiB-seconds, memory cost, pieces]: each
    segment clipped to the window and to now (or the moment the query is as of), its stretch inside each period
    priced in one call; pieces: how many (segment, UTC day or hour) pieces the report rounds to the micro-unit."""
    found: dict = defaultdict(lambda: [0, 0.0, 0.0, 0, 0.0, 0])
    until = NOW if query.as_of is None else query.as_of
    start, end = query.window.start_ts, min(query.window.end_ts, until)
    for row in rows:
        first, last = max(row["start_ts"], start), min(row["end_ts"] or until, end)
        stretches: dict = {}  # period -> [from, to]
        size = 3600 if query.step == "hour" else DAY
        for second in range(first - first % size, last if first < last else 0, size):  # each UTC day (hour) held
            a, b = max(first, second), min(last, second + size)
            if query.step == "hour":
                period = datetime.fromtimestamp(second, UTC)
            else:
                period = period_of(EPOCH_DAY + timedelta(days=second // DAY), query.step)
            stretches.setdefault(period, [a, b])[1] = b
        usage = Usage(row["flavor_id"], row["cluster_id"], row["priority_class_id"], row["devices"],
                      row["cpu_millis"], row["memory_mib"], row["tidal_devices"])
        keys = tuple(key_of(row, name) for name in query.group_by)
        for period, (a, b) in stretches.items():
            total = found[period, keys]
            total[0] += row["devices"] * (b - a)
            total[1] += row["cpu_millis"] * (b - a) / 1000
            total[2] += book.cost(usage, a, b)
            total[3] += row["memory_mib"] * (b - a)
            total[4] += book.memory_cost(usage, a, b)
            total[5] += 1 if query.step == "hour" else -(-b // DAY) - a // DAY
    return found


def pieces_inside(rows: list[dict], query: ReportQuery) -> int:
    """How many (segment, day) pieces of closed segments fall in the window: each rolled day rounds its CPU to a
    whole core-second (UsageDay.cpu_seconds is an integer column)."""
    start, end = query.window.start_ts, min(query.window.end_ts, NOW)
    count = 0
    for row in rows:
        if row["end_ts"] is not None:
            first, last = max(row["start_ts"], start), min(row["end_ts"], end)
            count += max(0, -(-last // DAY) - first // DAY) if last > first else 0
    return count


def check(report, wanted: dict, cpu_slack: float) -> None:
    got = {(row.period, row.keys): row for row in report.rows}
    assert set(got) == set(wanted)
    for key, (device_seconds, cpu_seconds, cost, memory_seconds, memory_cost, pieces) in wanted.items():
        row = got[key]
        # Each piece's money is rounded once to the micro-unit (each part: compute and memory): at most 1e-6 apiece
        # from the unrounded price.
        rounding = 1e-6 * pieces + 1e-9
        assert row.device_seconds == device_seconds
        assert abs(row.cpu_seconds - cpu_seconds) <= cpu_slack
        assert float(row.cost) == pytest.approx(cost, rel=1e-12, abs=rounding)
        assert row.memory_seconds == memory_seconds
        assert float(row.memory_cost) == pytest.approx(memory_cost, rel=1e-12, abs=rounding)
    assert report.total.cost_micros == sum(row.cost_micros for row in report.rows)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn_prices=prices(), drawn_segments=st.lists(segments(), max_size=8), query=queries(),
       as_of=st.one_of(st.none(), st.integers(T0, NOW)))
def test_a_report_equals_pricing_the_raw_segments_before_and_after_a_roll(world, drawn_prices, drawn_segments,
                                                                          query, as_of):
    """As of now, or as of an earlier moment (a page's, its CSV computed later): segments that ended or started
    after that moment, and were rolled since, count only up to it."""
    query = replace(query, as_of=as_of)
    with transaction.atomic():  # every example starts from the same empty tables
        book, rows = store(world, drawn_prices, drawn_segments)
        wanted = expected(book, rows, query)
        projects = Project.objects.values("id")
        now = datetime.fromtimestamp(NOW, UTC)
        before = usage_report(projects, query, now)
        check(before, wanted, cpu_slack=1e-6)
        assert roll_segments(now=now) == sum(1 for row in rows if row["end_ts"] is not None)
        assert UsageSegment.objects.filter(rolled=True, end_ts__isnull=True).count() == 0
        # an hourly report prices the segments themselves, rolled or not: no rounding of rolled CPU
        slack = 1e-6 if query.step == "hour" else 0.5 * pieces_inside(rows, query) + 1e-6
        after = usage_report(projects, query, now)
        check(after, wanted, cpu_slack=slack)
        # Rolled days round a day's money as a report prices an unrolled day: the same to the micro-unit.
        money = {(row.period, row.keys): (row.cost_micros, row.memory_cost_micros) for row in before.rows}
        assert {(row.period, row.keys): (row.cost_micros, row.memory_cost_micros) for row in after.rows} == money
        transaction.set_rollback(True)


def test_a_rolled_day_is_the_part_of_its_segment_inside_that_day(world):
    """By hand: 8 devices from 22:00 to 03:00 across a price change at midnight (2.00 then 4.00 a device-hour)."""
    h100 = world["flavors"][0]
    DevicePrice.objects.create(flavor_id=h100, per_device_hour=Decimal("2.00"),
                               effective_from=datetime(2025, 1, 1, tzinfo=UTC))
    DevicePrice.objects.create(flavor_id=h100, per_device_hour=Decimal("4.00"),
                               effective_from=datetime(2026, 1, 2, tzinfo=UTC))
    project = world["projects"][0]
    UsageSegment.objects.create(attempt_number=1, organization_id=project.organization_id, project=project,
                                flavor_id=h100, priority_class_id=world["classes"][0], stage="other", devices=8,
                                cpu_millis=1500, start_ts=T0 + 22 * 3600, end_ts=T0 + DAY + 3 * 3600)
    assert roll_segments() == 1
    days = list(UsageDay.objects.order_by("day").values_list("day", "device_seconds", "cpu_seconds", "cost_micros"))
    assert days == [(date(2026, 1, 1), 8 * 2 * 3600, 2 * 3600 * 1.5, 8 * 2 * 2_000_000),
                    (date(2026, 1, 2), 8 * 3 * 3600, 3 * 3600 * 1.5, 8 * 3 * 4_000_000)]
