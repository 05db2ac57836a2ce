"""Usage metering and cost reports on PostgreSQL: a year of 1,000,000 usage segments, rolled into priced days, then
reported on.

    .venv/bin/python bench/bench_costs.py [--segments 1000000] [--repeat 5] [--explain]

The world: 5 organizations of 20 projects, 40 users, 5 flavors on 2 clusters, the 4 default priority classes; jobs
spread over the 12 months before today, whose sizes and durations are drawn (seeded) from the real Philly week
trace (GPUs and run time, minutes to days) and whose CPU comes from the Alibaba 2023 pods (CPU per GPU; its GPU-less
pods are the CPU-only jobs); 15% of the jobs have a second or third attempt (preempted, failed or lost first). Prices:
a device-hour per flavor with a change in the middle of the year, one cluster's own price, a CPU core-hour, and
class factors (preemptible pays 0.3), and a memory GiB-hour per flavor. Nine jobs in ten carry a `team` label (12
teams) and a `cost-center` (one per organization). About 1,000 segments are left open, as the jobs running now.

Measured (warm; median of --repeat runs; wall and CPU milliseconds of this process and of its PostgreSQL backend):
the rollup of every closed segment (`costs.metering.rollup.roll_segments`, segments/s), a month's report by project and
flavor (< 100 ms), a month by a job label (`label:team`, and project with `label:cost-center`: < 100 ms), a day per
hour, the report's idle guarantee, a month of one project per day (< 50 ms), the CSV of the year per job and day
through the real streaming view (rows, time, peak memory: bounded), and the statements an admission and a finish
cost with and without the segment listener (at most one more).

Uses its own database, dropped and created again: BENCH_COSTS_DATABASE_URL, else DATABASE_URL when it is a
PostgreSQL database whose name contains "bench", else postgres://postgres@127.0.0.1:5432/tidal_bench_costs.
Skipped, with a message, when PostgreSQL cannot be reached.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.test import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TRACES = ROOT.parent / "shared" / "data" / "traces"
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/tidal_bench_costs"
DAY = 86_400
FLAVORS = ("nvidia-h100-80gb", "nvidia-a100-80gb", "nvidia-a100-40gb", "nvidia-l4", "amd-mi300x")
CLUSTERS = ("east", "west")
STAGES = ("pretrain", "sft", "rl", "eval", "data", "other")
# Priority class, share of the jobs.
CLASSES = (("normal", 0.6), ("high", 0.1), ("low", 0.1), ("preemptible", 0.2))
OPEN_SEGMENTS = 1000


def database_url() -> str:
    if os.environ.get("BENCH_COSTS_DATABASE_URL"):
        return os.environ["BENCH_COSTS_DATABASE_URL"]
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres") and "bench" in url.rpartition("/")[2]:
        return url
    return DEFAULT_URL


def prepare_database(url: str) -> bool:
    """A fresh database, or False when PostgreSQL is unreachable."""
    import psycopg

    base, _, name = url.rpartition("/")
    try:
        with psycopg.connect(f"{base}/postgres", autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as error:
        print(f"bench_costs: skipped, PostgreSQL is unreachable at {base}: {str(error).strip()}")
        return False
    # One connection for the whole run (its backend's CPU is measured), however long the CSV exports take.
    os.environ.update(DATABASE_URL=url, DATABASE_CONN_MAX_AGE="86400", DJANGO_SETTINGS_MODULE="tests.settings")
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-0123456789abcdef0123")
    return True


# -- the world -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class World:
    year: tuple[date, date]  # the 12 months: first day, and today (not included)
    now: datetime
    projects: list[tuple[int, int, list[int], list[str]]]  # (organization, project, users, experiments)
    weights: list[float]  # how busy each project is
    flavors: list[int]
    clusters: list[int]
    classes: dict[str, int]
    staff: Any


def build_catalog(now: datetime) -> World:
    from django.contrib.auth.models import User

    from clusters.models import Cluster
    from costs import services
    from costs.models import ClassDiscount, CpuPrice, DevicePrice, EffectiveDated, MemoryPrice
    from quotas.models import PriorityClass, Quota, ResourceFlavor
    from tenancy.models import Organization, Project

    today = now.date()
    first = today - timedelta(days=365)
    users = [User.objects.create_user(f"user{i}") for i in range(40)]
    staff = User.objects.create_user("staff", is_staff=True)
    projects = []
    for o in range(5):
        org = Organization.objects.create(name=f"Org {o}", slug=f"org{o}")
        for p in range(20):
            project = Project.objects.create(organization=org, name=f"Project {o}-{p}", slug=f"p{o}-{p}")
            members = [users[(o * 8 + p + k) % len(users)].pk for k in range(2 + p % 5)]
            projects.append((org.pk, project.pk, members, [f"exp-{p}-{k}" for k in range(8)]))
    flavors = [ResourceFlavor.objects.create(name=name, vendor=name.split("-")[0], device_resource="gpu")
               for name in FLAVORS]
    clusters = [Cluster.objects.create(name=name) for name in CLUSTERS]
    classes = dict(PriorityClass.objects.values_list("name", "pk"))
    # A guarantee per project of its main flavor (the report's idle guarantee reads them), counted from a year ago
    # (a guarantee counts from its project's creation when no audit entry says when its quota was made).
    Quota.objects.bulk_create(Quota(project_id=project, flavor=flavors[project % len(flavors)], guaranteed=8)
                              for _, project, _, _ in projects)
    Project.objects.update(created_at=datetime.combine(first, datetime.min.time(), UTC))

    def save(price: EffectiveDated) -> None:
        services.price_save(actor=None, price=price, backdate=True)

    since = datetime.combine(first - timedelta(days=30), datetime.min.time(), UTC)
    middle = datetime.combine(first + timedelta(days=182), datetime.min.time(), UTC)
    for flavor, before, after in zip(flavors, ("2.40", "1.60", "1.10", "0.45", "2.10"),
                                     ("2.00", "1.70", "1.10", "0.40", "1.80"), strict=True):
        save(DevicePrice(flavor=flavor, per_device_hour=Decimal(before), effective_from=since))
        if after != before:  # the mid-year price change
            save(DevicePrice(flavor=flavor, per_device_hour=Decimal(after), effective_from=middle))
    save(DevicePrice(flavor=flavors[0], cluster=clusters[1], per_device_hour=Decimal("2.60"), effective_from=since))
    save(CpuPrice(per_core_hour=Decimal("0.04"), effective_from=since))
    for flavor in flavors:
        save(MemoryPrice(flavor=flavor, per_gib_hour=Decimal("0.005"), effective_from=since))
    save(ClassDiscount(priority_class_id=classes["preemptible"], factor=Decimal("0.3"), effective_from=since))
    save(ClassDiscount(priority_class_id=classes["low"], factor=Decimal("0.8"), effective_from=middle))
    rng = random.Random(11)
    weights = [1 / (rank + 1) ** 0.8 for rank in range(len(projects))]
    rng.shuffle(weights)
    return World((first, today), now, projects, weights, [f.pk for f in flavors], [c.pk for c in clusters],
                 classes, staff)


def real_shapes() -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """(GPUs, seconds) of the Philly week's jobs; Alibaba's CPU millicores per GPU and of its GPU-less pods."""
    with open(TRACES / "philly_week_2017-10-16.csv", newline="", encoding="utf-8") as f:
        jobs = [(int(row["num_gpus"]), max(60, int(float(row["duration_s"])))) for row in csv.DictReader(f)]
    per_gpu, cpu_only = [], []
    with open(TRACES / "alibaba2023_pods_gpuspec.csv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            gpus, cpu = int(row["num_gpu"]), int(row["cpu_milli"])
            if gpus:
                per_gpu.append(cpu // gpus)
            elif cpu:
                cpu_only.append(cpu)
    return jobs, per_gpu, cpu_only


JOB_COLUMNS = ("id", "project_id", "submitter_id", "submitter_name", "name", "stage", "experiment", "image",
               "priority_class_id", "flavor_id", "total_devices", "state", "attempt", "submitted_at", "queued_at",
               "finished_at")
SEGMENT_COLUMNS = ("attempt_number", "job_id", "organization_id", "project_id", "user_id", "cluster_id",
                   "flavor_id", "priority_class_id", "stage", "experiment", "devices", "cpu_millis", "borrowed",
                   "start_ts", "end_ts", "outcome", "rolled", "memory_mib", "labels")
TEAMS = 12
FIRST_OUTCOMES = ("preempted", "preempted", "failed", "lost")
LAST_OUTCOMES = ("succeeded",) * 8 + ("failed", "cancelled")


def generate(world: World, count: int, seed: int = 7) -> tuple[list[list], list[list]]:
    """Jobs and their segments (one per attempt, in time order) until `count` segments: job rows and segment rows
    in the column orders above."""
    rng = random.Random(seed)
    shapes, per_gpu, cpu_only = real_shapes()
    start, stop = (int(datetime.combine(day, datetime.min.time(), UTC).timestamp()) for day in world.year)
    now = int(world.now.timestamp())
    names = tuple(name for name, _ in CLASSES)
    shares = tuple(share for _, share in CLASSES)
    jobs: list[list] = []
    segments: list[list] = []
    while len(segments) < count:
        org, project, users, experiments = rng.choices(world.projects, world.weights)[0]
        job_id = len(jobs) + 1
        user, klass = rng.choice(users), world.classes[rng.choices(names, shares)[0]]
        stage, experiment = rng.choice(STAGES), rng.choice(experiments + [""])
        flavor = world.flavors[(project + rng.choice((0, 0, 0, 1, 2))) % len(world.flavors)]
        cluster = world.clusters[0 if rng.random() < 0.6 else 1]
        gpus, _ = rng.choice(shapes)
        devices = 0 if rng.random() < 0.05 else gpus
        cpu = rng.choice(cpu_only) if not devices else devices * rng.choice(per_gpu)
        attempts = rng.choices((1, 2, 3), (0.85, 0.10, 0.05))[0]
        memory = max(1, devices) * rng.choice((16384, 32768, 65536))
        labels = json.dumps({} if rng.random() < 0.1 else {"team": f"team-{rng.randrange(TEAMS)}",
                                                            "cost-center": f"cc-{org}"})
        at = rng.randrange(start, stop)
        submitted, outcome = at - rng.randrange(0, 1800), ""
        for number in range(1, attempts + 1):
            end = at + rng.choice(shapes)[1]
            last = number == attempts or end >= now
            outcome = "" if end >= now else rng.choice(LAST_OUTCOMES if last else FIRST_OUTCOMES)
            segments.append([number, job_id, org, project, user, cluster, flavor, klass, stage, experiment,
                             devices, cpu, 0, at, end if outcome else None, outcome, False, memory, labels])
            if last:
                break
            at = end + rng.randrange(60, 1800)
        state = {"": "running", "preempted": "queued", "lost": "failed"}.get(outcome, outcome)
        jobs.append([job_id, project, user, f"user{user}", f"train-{job_id}", stage, experiment,
                     "ghcr.io/acme/train:1", klass, flavor, devices, state, number, submitted, submitted,
                     segments[-1][14]])
    leave_open(jobs, segments[:count])
    return in_submission_order(jobs, segments[:count])


def in_submission_order(jobs: list[list], segments: list[list]) -> tuple[list[list], list[list]]:
    """Job ids in submission order, as the platform numbers them (a day's jobs have neighbouring ids), and the
    segments in start order, as they are written."""
    jobs.sort(key=lambda job: job[13])
    number = {job[0]: new for new, job in enumerate(jobs, 1)}
    for job in jobs:
        job[0] = number[job[0]]
        job[4] = f"train-{job[0]}"
    for segment in segments:
        segment[1] = number[segment[1]]
    return jobs, sorted(segments, key=lambda segment: segment[13])


def leave_open(jobs: list[list], segments: list[list]) -> None:
    """The last attempts of the jobs started last hold their devices now: about OPEN_SEGMENTS open segments."""
    latest = sorted((s for s in segments if s[14] is not None and s[0] == jobs[s[1] - 1][12]), key=lambda s: -s[13])
    for segment in latest[:max(0, OPEN_SEGMENTS - sum(1 for s in segments if s[14] is None))]:
        segment[14], segment[15] = None, ""
        job = jobs[segment[1] - 1]
        job[11], job[15] = "running", None


def copy_rows(table: str, columns: tuple[str, ...], rows: list, convert: Callable[[list], list] = list) -> None:
    from django.db import connection

    with connection.cursor() as cursor, cursor.cursor.copy(
            f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(convert(row))


def insert(jobs: list[list], segments: list[list]) -> None:
    """Jobs (every column the model has, defaults from the model) and segments, through COPY."""
    from django.db import connection

    from costs.models import UsageSegment
    from jobs.models import Job

    fields = [f for f in Job._meta.concrete_fields if f.column not in JOB_COLUMNS and not f.primary_key]
    defaults = [f.get_db_prep_save(f.get_default(), connection) for f in fields]

    def job_row(row: list) -> list:
        stamp = [datetime.fromtimestamp(v, UTC) if v is not None else None for v in row[13:16]]
        return [*row[:13], *stamp, *defaults]

    copy_rows(Job._meta.db_table, (*JOB_COLUMNS, *(f.column for f in fields)), jobs, job_row)
    copy_rows(UsageSegment._meta.db_table, SEGMENT_COLUMNS, segments)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{Job._meta.db_table}', 'id'), %s)", [len(jobs)])
        cursor.execute("ANALYZE")


# -- measuring -----------------------------------------------------------------------------------------------------

def backend_cpu() -> float:
    """CPU seconds of this connection's PostgreSQL backend (same machine), from /proc."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Timing:
    wall: float  # milliseconds, median
    best: float  # the fastest run, wall
    cpu: float  # this process
    pg: float  # its PostgreSQL backend: the mean, as /proc counts it in 10 ms ticks
    value: Any = None  # what the last run returned


def timed(fn: Callable[[], Any], repeat: int) -> Timing:
    """Medians of `repeat` runs after one unmeasured warm-up."""
    fn()
    walls, cpus, pgs, value = [], [], [], None
    for _ in range(repeat):
        pg0, cpu0, wall0 = backend_cpu(), time.process_time(), time.perf_counter()
        value = fn()
        walls.append((time.perf_counter() - wall0) * 1000)
        cpus.append((time.process_time() - cpu0) * 1000)
        pgs.append((backend_cpu() - pg0) * 1000)
    return Timing(statistics.median(walls), min(walls), statistics.median(cpus), statistics.fmean(pgs), value)


def roll_all() -> tuple[int, Timing]:
    from costs.metering.rollup import roll_segments

    pg0, cpu0, wall0 = backend_cpu(), time.process_time(), time.perf_counter()
    rolled = 0
    while done := roll_segments():
        rolled += done
    wall = (time.perf_counter() - wall0) * 1000
    timing = Timing(wall, wall, (time.process_time() - cpu0) * 1000, (backend_cpu() - pg0) * 1000)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE costs_usagesegment")
        cursor.execute("VACUUM ANALYZE costs_usageday")
    return rolled, timing


def month_of(today: date, back: int) -> tuple[date, date]:
    first = today.replace(day=1)
    for _ in range(back):
        first = (first - timedelta(days=1)).replace(day=1)
    return first, (first + timedelta(days=32)).replace(day=1)


def peak_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux 4.0+)


def csv_lines(client: Client, url: str) -> Iterator[bytes]:
    response = client.get(url)
    assert response.status_code == 200 and response.streaming, response.status_code
    yield from response.streaming_content
    response.close()


def csv_export(client: Client, url: str) -> tuple[int, int]:
    """Rows (without the header) and bytes of the streamed CSV, read line by line and thrown away."""
    rows = size = 0
    for chunk in csv_lines(client, url):
        rows += chunk.count(b"\n")
        size += len(chunk)
    return rows - 1, size


def csv_memory(client: Client, url: str) -> tuple[float, float]:
    """Peak Python allocations (tracemalloc) and peak RSS growth, in MiB, while the CSV streams."""
    reset_peak_rss()
    before = peak_rss_kib()
    tracemalloc.start()
    try:
        csv_export(client, url)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / 2**20, (peak_rss_kib() - before) / 1024


def statements(world: World, batches: tuple[int, ...]) -> list[tuple[str, int, int]]:
    """(what, statements without the segment listener, with it) for admitting each batch of jobs in one
    transition_many, for starting one job and for finishing it, each inside a transaction rolled back
    afterwards."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from costs.metering import segments
    from jobs import lifecycle
    from jobs.lifecycle import Admission, transition, transition_many
    from jobs.models import Job, ReplicaGroup
    from jobs.states import State

    _, project, users, _ = world.projects[0]
    now = timezone.now()
    jobs = [Job.objects.create(project_id=project, submitter_id=users[0], submitter_name="bench", name="bench",
                               image="img", flavor_id=world.flavors[0], priority_class_id=world.classes["normal"],
                               total_devices=8, submitted_at=now, queued_at=now) for _ in range(max(batches))]
    ReplicaGroup.objects.bulk_create(ReplicaGroup(job=job, role="worker", replicas=1, devices=8,
                                                  flavor_id=world.flavors[0]) for job in jobs)
    admissions = [Admission(job.pk, world.clusters[0], [{"role": "worker", "index": 0, "node": f"n{i}",
                                                         "devices": 8}]) for i, job in enumerate(jobs)]

    def count(action: Callable[[], Any], listening: bool) -> int:
        listeners = [r for r in lifecycle.on_change if listening or r != segments.follow_attempts]
        with (lifecycle.on_change.replaced(listeners), CaptureQueriesContext(connection) as queries,
              transaction.atomic()):
            action()
            transaction.set_rollback(True)  # undone, with the work it left for after commit
        return sum(1 for q in queries.captured_queries if "SAVEPOINT" not in q["sql"])

    def admit(batch: int) -> Callable[[], Any]:
        return lambda: transition_many(admissions[:batch], now=timezone.now())

    def finish() -> None:
        transition(Job.objects.get(pk=jobs[0].pk), State.SUCCEEDED, reason="done", actor="backend")

    rows = [(f"admission of {batch} job(s) in one transition_many", count(admit(batch), False),
             count(admit(batch), True)) for batch in batches]
    def start() -> None:
        transition(Job.objects.get(pk=jobs[0].pk), State.RUNNING, reason="run", actor="backend")

    with transaction.atomic():  # a job to start, then to finish, then everything is undone
        transition_many(admissions[:1], now=timezone.now())
        transition(Job.objects.get(pk=jobs[0].pk), State.DISPATCHING, reason="dispatch", actor="backend")
        rows.append(("start of a dispatched job (one transition)", count(start, False), count(start, True)))
        start()
        rows.append(("finish of a running job (one transition)", count(finish, False), count(finish, True)))
        transaction.set_rollback(True)
    Job.objects.filter(pk__in=[job.pk for job in jobs]).delete()
    return rows


def explain(world: World) -> None:
    """EXPLAIN ANALYZE of the rolled part of each report (the query that reads the most)."""
    from django.db import connection

    from costs.reports.usage import ReportQuery, Window, rolled_values
    from costs.selectors import report_projects

    projects = report_projects(world.staff)
    month = Window(*month_of(world.now.date(), 1))
    for label, query in (("(a) month by project and flavor", ReportQuery(month, ("project", "flavor"))),
                         ("(b) one project per day", ReportQuery(month, (), "day",
                                                                 {"project_id": world.projects[0][1]})),
                         ("(c) year per job and day", ReportQuery(Window(*world.year), ("job",), "day"))):
        sql, params = rolled_values(projects, query).query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
            print(f"\n{label}:\n" + "\n".join(row[0] for row in cursor.fetchall()))


# -- the run -------------------------------------------------------------------------------------------------------

def line(what: str, target: str, measured: str, met: bool | str | None) -> str:
    verdict = met if isinstance(met, str) else "" if met is None else "yes" if met else "NO"
    return f"{what:<66}{target:>12}  {measured:<56}{verdict:>4}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5, help="measured runs per figure (the median is shown)")
    parser.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE of the reports' queries")
    args = parser.parse_args()
    if not prepare_database(database_url()):
        return 0
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client
    from django.utils import timezone

    from costs.models import UsageDay, UsageSegment
    from costs.reports.usage import ReportQuery, Window, usage_report
    from costs.selectors import report_projects
    from mlplatform.celery import app

    app.conf.task_always_eager, app.conf.broker_url = False, "memory://"  # no worker's task runs inside the bench
    call_command("migrate", verbosity=0)
    now = timezone.now()
    world = build_catalog(now)
    started = time.perf_counter()
    jobs, segments = generate(world, args.segments)
    generated = time.perf_counter() - started
    insert(jobs, segments)
    inserted = time.perf_counter() - started - generated
    print(f"{len(segments):,} segments of {len(jobs):,} jobs over {world.year[0]} .. {world.year[1]}: generated in "
          f"{generated:.1f} s, inserted (COPY) in {inserted:.1f} s", flush=True)
    count = len(segments)
    del jobs, segments  # a gigabyte of rows this process no longer needs (its memory is measured below)
    rolled, roll = roll_all()
    days = UsageDay.objects.count()
    unrolled = UsageSegment.objects.filter(rolled=False).count()
    print(f"rolled {rolled:,} segments into {days:,} priced days; {unrolled:,} left unrolled (open)", flush=True)

    projects = report_projects(world.staff)
    month = Window(*month_of(now.date(), 1))
    current = Window(*month_of(now.date(), 0))
    project = world.projects[0][1]
    by_project_flavor = timed(lambda: usage_report(projects, ReportQuery(month, ("project", "flavor")), now),
                              args.repeat)
    this_month = timed(lambda: usage_report(projects, ReportQuery(current, ("project", "flavor")), now), args.repeat)
    per_day = timed(lambda: usage_report(projects, ReportQuery(month, (), "day", {"project_id": project}), now),
                    args.repeat)
    by_team = timed(lambda: usage_report(projects, ReportQuery(month, ("label:team",)), now), args.repeat)
    by_cost_center = timed(lambda: usage_report(projects, ReportQuery(month, ("project", "label:cost-center")), now),
                           args.repeat)
    day = Window(current.start, current.start + timedelta(days=1))
    hourly = timed(lambda: usage_report(projects, ReportQuery(day, ("label:team",), "hour"), now), args.repeat)
    from costs.reports.idle import idle_guarantee

    idle = timed(lambda: idle_guarantee(projects, ReportQuery(month, ()), now), args.repeat)
    client = Client(HTTP_HOST="localhost")
    client.force_login(world.staff)
    last = world.year[1] - timedelta(days=1)
    url = f"/api/v1/costs/csv/?start={world.year[0]}&end={last}&group_by=job&step=day"
    export = timed(lambda: csv_export(client, url), args.repeat)
    python_peak, rss_growth = csv_memory(client, url)
    counted = statements(world, (1, 20))
    if args.explain:
        explain(world)

    ms = lambda t: f"{t.wall:,.1f} ms, best {t.best:,.1f} (CPU {t.cpu:,.1f} + PG {t.pg:,.1f})"  # noqa: E731
    rate = rolled / (roll.wall / 1000)
    print(f"\nCosts on PostgreSQL: {count:,} segments, {days:,} priced days, {unrolled:,} open; "
          f"wall ms, median of {args.repeat} warm runs (CPU: of this process, median, + of its PostgreSQL backend, "
          "mean)")
    print(line("what", "target", "measured", "met"))
    rows = [
        line(f"rollup of {rolled:,} closed segments", ">= 10,000/s",
             f"{rate:,.0f}/s, {roll.wall / 1000:,.1f} s (CPU {roll.cpu / 1000:,.1f} + PG {roll.pg / 1000:,.1f})",
             rate >= 10_000),
        line(f"(a) {month.start:%Y-%m} by project and flavor "
             f"({len(by_project_flavor.value.rows)} rows)", "< 100 ms", ms(by_project_flavor),
             by_project_flavor.wall < 100),
        line(f"    the same for {current.start:%Y-%m}, open segments priced now "
             f"({len(this_month.value.rows)} rows)", "< 100 ms", ms(this_month), this_month.wall < 100),
        line(f"(b) {month.start:%Y-%m} of one project per day ({len(per_day.value.rows)} rows)", "< 50 ms",
             ms(per_day), per_day.wall < 50),
        line(f"(e) {month.start:%Y-%m} by label:team ({len(by_team.value.rows)} rows)", "< 100 ms", ms(by_team),
             by_team.wall < 100),
        line(f"    by project and label:cost-center ({len(by_cost_center.value.rows)} rows)", "< 100 ms",
             ms(by_cost_center), by_cost_center.wall < 100),
        line(f"(f) {day.start} per hour by label:team ({len(hourly.value.rows)} rows, from segments)", "",
             ms(hourly), None),
        line(f"(g) {month.start:%Y-%m} idle guarantee ({len(idle.value.rows)} projects with a guarantee)", "",
             ms(idle), None),
        line(f"(c) CSV of the year per job and day: {export.value[0]:,} rows, {export.value[1] / 2**20:,.0f} MiB",
             "", ms(export), None),
        line("    its peak memory: Python allocations / RSS growth", "< 64 MiB",
             f"{python_peak:,.1f} MiB / {rss_growth:,.1f} MiB", max(python_peak, rss_growth) < 64),
    ]
    for what, without, with_segments in counted:
        extra = with_segments - without
        rows.append(line(f"(d) {what}", "<= +1", f"{without} -> {with_segments} statements (+{extra})", extra <= 1))
    print("\n".join(rows))
    print(f"  {os.cpu_count()} cores shared with PostgreSQL (and other users of this machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
