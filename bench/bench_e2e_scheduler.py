"""End to end on PostgreSQL: 15,000 queued jobs through the scheduler loop, every one admitted or explained, the
decisions persisted. Target: at least 1,000 jobs per second (Kueue's published baseline: 15,000 workloads in 351 s).

Uses its own database (`tidal_bench` on DATABASE_URL's server, created if missing, or BENCH_DATABASE_URL). The jobs
are inserted in bulk, as a queue after a submission burst; API submission speed is bench_api.py's subject.
Dispatch tasks are queued (in memory), not run: workers do that part, outside the scheduler loop.

    .venv/bin/python bench/bench_e2e_scheduler.py [--jobs 15000] [--nodes 1000]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
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


def build_world(n_jobs: int, n_nodes: int, seed: int = 1) -> None:
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
    user, _ = User.objects.get_or_create(username="bench")
    normal = PriorityClass.objects.get(name="normal")
    now = timezone.now()
    jobs = []
    for i in range(n_jobs):
        replicas = rng.randint(1, 8)
        devices = rng.choice([1, 2, 4, 8])
        while replicas * devices > 64:
            replicas -= 1
        jobs.append((Job(project=rng.choice(projects), submitter=user, submitter_name="bench", name=f"j{i}",
                         image="img", command=["x"], priority_class=normal, flavor=rng.choice(flavors),
                         total_devices=replicas * devices, submitted_at=now, queued_at=now), replicas, devices))
    Job.objects.bulk_create([job for job, _, _ in jobs], batch_size=2000)
    ReplicaGroup.objects.bulk_create((ReplicaGroup(job=job, role="worker", replicas=replicas, devices=devices,
                                                   flavor=job.flavor) for job, replicas, devices in jobs),
                                     batch_size=2000)
    JobEvent.objects.bulk_create((JobEvent(job=job, created_at=now, kind="transition", to_state="queued",
                                           reason="submitted", actor_name="bench") for job, _, _ in jobs),
                                 batch_size=2000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=15000)
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    prepare_database()
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mlplatform.settings")
    django.setup()
    from django.core.management import call_command

    from jobs.loop import run_once
    from jobs.models import Job
    from mlplatform.celery import app

    app.conf.task_always_eager = False  # dispatch is the workers' job: queue it in memory, do not run it here
    app.conf.broker_url = "memory://"
    call_command("migrate", verbosity=0)
    build_world(args.jobs, args.nodes)

    started = time.perf_counter()
    cycles = []
    while True:
        t0 = time.perf_counter()
        result = run_once()
        cycles.append((time.perf_counter() - t0, len(result.admits), len(result.waits)))
        unexplained = Job.objects.filter(state="queued", wait_reason="").count()
        if unexplained == 0 or len(cycles) >= 20:
            break
    elapsed = time.perf_counter() - started
    admitted = Job.objects.exclude(state="queued").count()
    explained = Job.objects.filter(state="queued").exclude(wait_reason="").count()
    rate = args.jobs / elapsed
    print(f"{'case':<44}{'jobs':>8}{'cycles':>8}{'seconds':>10}{'jobs/s':>10}{'target':>10}  ok")
    print(f"{'15k queued -> admitted or explained (PG)':<44}{args.jobs:>8}{len(cycles):>8}{elapsed:>10.2f}"
          f"{rate:>10.0f}{'>=1000':>10}  {'ok' if rate >= 1000 and unexplained == 0 else 'FAIL'}")
    print(f"  admitted {admitted}, waiting with a reason {explained}, unexplained {unexplained}; per cycle: "
          + ", ".join(f"{s:.2f}s/{a} admits/{w} waits" for s, a, w in cycles))
    print("  reference: Kueue's published baseline, 15,000 workloads in 351 s = 43 jobs/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
