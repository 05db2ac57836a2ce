"""End to end on PostgreSQL: 15,000 queued jobs through the scheduler loop, every one admitted or explained, the
decisions persisted.

Two different things happen to a queued job in a cycle, and they are counted apart:
- admissions: jobs started (written as admitted, with an attempt). The cluster (1,000 nodes of 8 devices) holds a
  few hundred of these jobs at once, so one burst admits about 480 and the rest wait;
- waits explained: jobs left queued with a reason written ("waiting for capacity: ...").
Target: the whole queue decided (every job admitted or explained) within 15 s, i.e. 1,000 jobs per second.
Only admissions compare with Kueue's published baseline (15,000 workloads admitted in 351 s = 43 per second):
Kueue's figure spans workloads finishing and freeing quota, this one is a single burst on an empty cluster, so
take the comparison as an order of magnitude, not a race.

Uses its own database (`tidal_bench` on DATABASE_URL's server, created if missing, or BENCH_DATABASE_URL). The jobs
are inserted in bulk, as a queue after a submission burst; API submission speed is bench_api.py's subject.
Dispatch tasks are queued (in memory), not run: workers do that part, outside the scheduler loop. Each run rebuilds
the queue; the table gives the median over runs of wall time and of this process's CPU time (the scheduler's side:
PostgreSQL's own CPU is not in it).

    .venv/bin/python bench/bench_e2e_scheduler.py [--jobs 15000] [--nodes 1000] [--repeat 3] [--pool-nodes 0]

`--pool-nodes N`: the last N nodes of the first flavor form a Tidal pool whose serving demands half of them
(docs/pools.md), and one job in five is preemptible: the cycle then reads and records the pool as in production.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def prepare_database() -> None:
    url = os.environ.get("BENCH_DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/tidal_bench"
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = url
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-0123456789abcdef0123")


def build_world(n_jobs: int, n_nodes: int, pool_nodes: int = 0, seed: int = 1) -> None:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.utils import timezone

    from clusters.models import Cluster, Node
    from jobs.models import Job, JobEvent, ReplicaGroup
    from quotas.models import PriorityClass, Quota, ResourceFlavor
    from tenancy.models import Organization, Project

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobs_jobevent, jobs_replicagroup, jobs_job, quotas_quota, quotas_projectusage, "
                       "clusters_node, clusters_cluster CASCADE")
    rng = random.Random(seed)
    flavors = [ResourceFlavor.objects.get_or_create(name=f"gpu-{i}", defaults={
        "vendor": "nvidia", "device_resource": "nvidia.com/gpu"})[0] for i in range(4)]
    cluster = Cluster.objects.create(name="bench")
    Node.objects.bulk_create(Node(cluster=cluster, name=f"n{i:04d}", flavor=flavors[i % 4], devices=8,
                                  rack=f"rack-{i % 40:02d}", block=f"block-{i % 4}", position=i)
                             for i in range(n_nodes))
    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    projects = [Project.objects.get_or_create(slug=f"p{i:03d}", defaults={"organization": org, "name": f"P{i}"})[0]
                for i in range(100)]
    per_flavor = n_nodes * 8 // 4
    Quota.objects.bulk_create(Quota(project=p, flavor=f, guaranteed=per_flavor // 100, borrow_limit=per_flavor // 10)
                              for p in projects for f in flavors)
    if pool_nodes:
        from pools.models import Pool

        Pool.objects.create(name="serving", cluster=cluster, flavor=flavors[0], devices=pool_nodes * 8,
                            headroom_percent=0, demand=pool_nodes * 4, use_foreign_pods=False)
    user, _ = User.objects.get_or_create(username="bench")
    normal = PriorityClass.objects.get(name="normal")
    preemptible = PriorityClass.objects.get(name="preemptible")
    now = timezone.now()
    jobs = []
    for i in range(n_jobs):
        replicas = rng.randint(1, 8)
        devices = rng.choice([1, 2, 4, 8])
        while replicas * devices > 64:
            replicas -= 1
        jobs.append((Job(project=rng.choice(projects), submitter=user, submitter_name="bench", name=f"j{i}",
                         image="img", command=["x"],
                         priority_class=preemptible if pool_nodes and i % 5 == 0 else normal,
                         flavor=rng.choice(flavors),
                         total_devices=replicas * devices, submitted_at=now, queued_at=now), replicas, devices))
    Job.objects.bulk_create([job for job, _, _ in jobs], batch_size=2000)
    ReplicaGroup.objects.bulk_create((ReplicaGroup(job=job, role="worker", replicas=replicas, devices=devices,
                                                   flavor=job.flavor) for job, replicas, devices in jobs),
                                     batch_size=2000)
    JobEvent.objects.bulk_create((JobEvent(job=job, created_at=now, kind="transition", to_state="queued",
                                           reason="submitted", actor_name="bench") for job, _, _ in jobs),
                                 batch_size=2000)


KUEUE_ADMITTED = 15_000  # Kueue's published baseline: workloads admitted ...
KUEUE_SECONDS = 351.0  # ... in this many seconds
TARGET_SECONDS_PER_15K = 15.0  # the whole queue decided: 1,000 jobs per second


@dataclass
class Run:
    """One run: the queue from inserted to every job admitted or explained."""

    wall: float  # seconds
    cpu: float  # CPU seconds of this process (the scheduler loop), PostgreSQL's not included
    admitted: int
    explained: int  # left queued with a reason
    unexplained: int  # left queued without one (the run failed if any)
    cycles: list[tuple[float, int, int]] = field(default_factory=list)  # (seconds, admits, waits) per cycle

    @property
    def admissions_per_s(self) -> float:
        return self.admitted / self.wall

    @property
    def explained_per_s(self) -> float:
        return self.explained / self.wall


def kueue_admissions_per_s() -> float:
    return KUEUE_ADMITTED / KUEUE_SECONDS


def report(runs: list[Run], jobs: int, pool_nodes: int = 0) -> tuple[list[str], bool]:
    """The table (medians over runs), one line per run, the admissions-only comparison with Kueue, and whether
    the target held (every job admitted or explained, the median run within the target time)."""
    wall = statistics.median(r.wall for r in runs)
    cpu = statistics.median(r.cpu for r in runs)
    admitted = statistics.median(r.admitted for r in runs)
    waiting = statistics.median(r.explained for r in runs)
    admits = statistics.median(r.admissions_per_s for r in runs)
    explained = statistics.median(r.explained_per_s for r in runs)
    target = TARGET_SECONDS_PER_15K * jobs / 15_000
    case = f"{jobs} queued -> admitted or explained (PG)" + (f", pool of {pool_nodes}" if pool_nodes else "")
    ok = all(r.unexplained == 0 for r in runs) and wall <= target
    lines = [
        f"{'case':<44}{'runs':>5}{'wall s':>8}{'cpu s':>7}{'admitted':>9}{'admissions/s':>13}{'explained':>10}"
        f"{'waits explained/s':>18}{'target':>10}  ok",
        f"{case:<44}{len(runs):>5}{wall:>8.2f}{cpu:>7.2f}"
        f"{admitted:>9.0f}{admits:>13.0f}{waiting:>10.0f}{explained:>18.0f}{f'<={target:.0f} s':>10}"
        f"  {'ok' if ok else 'FAIL'}",
        "  wall s and cpu s: medians over runs; admissions/s = jobs admitted / wall s; waits explained/s = jobs left"
        " queued with a reason / wall s",
    ]
    for i, r in enumerate(runs, 1):
        lines.append(f"  run {i}: {r.wall:.2f} s wall, {r.cpu:.2f} s cpu; admitted {r.admitted}, waiting with a reason "
                     f"{r.explained}, unexplained {r.unexplained}; per cycle: "
                     + ", ".join(f"{s:.2f}s/{a} admits/{w} waits" for s, a, w in r.cycles))
    lines.append(f"  admissions vs Kueue's published baseline ({KUEUE_ADMITTED:,} workloads admitted in "
                 f"{KUEUE_SECONDS:.0f} s = {kueue_admissions_per_s():.0f} admissions/s): {admits:.0f} admissions/s "
                 f"here, in one burst onto an empty cluster")
    return lines, ok


def run_queue(jobs: int, nodes: int, pool_nodes: int = 0) -> Run:
    """Insert the queue, then cycle until every job is admitted or explained (at most 20 cycles)."""
    from jobs.loop import run_once
    from jobs.models import Job

    build_world(jobs, nodes, pool_nodes)
    cycles = []
    started, cpu0 = time.perf_counter(), time.process_time()
    while True:
        t0 = time.perf_counter()
        result = run_once()
        assert result is not None, "another scheduler holds the leader lock"
        cycles.append((time.perf_counter() - t0, len(result.admits), len(result.waits)))
        unexplained = Job.objects.filter(state="queued", wait_reason="").count()
        if unexplained == 0 or len(cycles) >= 20:
            break
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
    admitted = Job.objects.exclude(state="queued").count()
    explained = Job.objects.filter(state="queued").exclude(wait_reason="").count()
    return Run(wall, cpu, admitted, explained, unexplained, cycles)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=15000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="runs, each on a freshly inserted queue")
    parser.add_argument("--pool-nodes", type=int, default=0, help="nodes of a Tidal pool (0: none)")
    args = parser.parse_args()
    prepare_database()
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")  # production's, with throwaway keys
    django.setup()
    from django.core.management import call_command

    from mlplatform.celery import app

    app.conf.task_always_eager = False  # dispatch is the workers' job: queue it in memory, do not run it here
    app.conf.broker_url = "memory://"
    call_command("migrate", verbosity=0)
    runs = [run_queue(args.jobs, args.nodes, args.pool_nodes) for _ in range(max(1, args.repeat))]
    lines, ok = report(runs, args.jobs, args.pool_nodes)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
