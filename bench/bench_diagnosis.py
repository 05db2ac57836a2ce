"""Failure diagnosis: accuracy on the labelled corpus, and how soon a hang is detected.

1. Classification: every case of tests/data/failures/ (at least 200 failed attempts: pod statuses, exit codes, log
   tails with noise, DCGM Xid events, node conditions, Kubernetes events, alerts) diagnosed by the built-in rules
   (`reliability.rules.diagnose`), seen as the platform sees it (`reliability.corpus`). Goal: at least 90% overall,
   no class under 80%. Printed per class with the classes it was mistaken for, and the median time per diagnosis
   (wall and CPU).
2. Hang detection delay: simulated runs (step times from 0.5 s to 120 s) stop logging steps at a random moment;
   the real check (`reliability.hangs.check_hangs`, against a throw-away SQLite database) runs every
   TIDAL_HANG_CHECK_INTERVAL seconds of simulated time. Printed: the delay from the last step to the detection,
   beside the goal (2 x step time + 60 s) and NCCL's default watchdog (600 s).

    .venv/bin/python bench/bench_diagnosis.py [--repeat 5] [--skip-hangs]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def classification(repeat: int) -> bool:
    from reliability import corpus, rules

    cases = list(corpus.cases())
    compiled = rules.ruleset()
    per_class: dict[str, list[bool]] = defaultdict(list)
    mistaken: dict[str, Counter[str]] = defaultdict(Counter)
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        results = [(case, rules.diagnose(case.evidence, compiled)) for case in cases]
        walls.append((time.perf_counter() - wall) / len(cases))
        cpus.append((time.process_time() - cpu) / len(cases))
    for case, found in results:
        per_class[case.label].append(found.cause == case.label)
        if found.cause != case.label:
            mistaken[case.label][found.cause] += 1
    print(f"Classification: {len(cases)} failed attempts, {len(per_class)} classes "
          f"(median per diagnosis: {statistics.median(walls) * 1e6:.0f} us wall, "
          f"{statistics.median(cpus) * 1e6:.0f} us CPU)")
    print(f"{'class':<14} {'cases':>5} {'right':>5} {'accuracy':>8}  mistaken for")
    worst = 1.0
    for label in sorted(per_class):
        hits = per_class[label]
        accuracy = sum(hits) / len(hits)
        worst = min(worst, accuracy)
        wrong = ", ".join(f"{cause} x{n}" for cause, n in mistaken[label].most_common())
        print(f"{label:<14} {len(hits):>5} {sum(hits):>5} {accuracy:>8.1%}  {wrong}")
    total = sum(sum(h) for h in per_class.values()) / len(cases)
    ok = total >= 0.90 and worst >= 0.80
    print(f"{'overall':<14} {len(cases):>5} {sum(sum(h) for h in per_class.values()):>5} {total:>8.1%}  "
          f"goal >= 90% overall, no class < 80%: {'met' if ok else 'NOT met'} (worst class {worst:.1%})")
    return ok


def hang_delays(runs: int, seed: int = 28) -> bool:
    """Simulated hangs through the real check, on a throw-away database."""
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-0123456789abcdef0123")
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")  # production's, with throwaway keys
    import django

    django.setup()
    import logging
    from datetime import timedelta

    from django.conf import settings
    from django.db import connection
    from django.test.utils import setup_test_environment
    from django.utils import timezone

    logging.disable(logging.WARNING)  # the eager tasks' and the check's own log lines
    setup_test_environment()
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    from django.contrib.auth.models import User

    from clusters.models import Cluster, Node
    from jobs.lifecycle import Admission, transition, transition_many
    from jobs.models import Job
    from jobs.services import job_submit
    from jobs.states import State
    from quotas.models import PriorityClass, Quota, ResourceFlavor
    from reliability.hangs import check_hangs
    from reliability.models import Progress
    from tenancy.models import Organization, Project
    from tracking.models import Run

    interval = settings.TIDAL["HANG_CHECK_INTERVAL"]
    rng = random.Random(seed)
    PriorityClass.objects.get_or_create(name="normal", defaults={"value": 500, "is_default": True})
    flavor = ResourceFlavor.objects.create(name="h100", vendor="nvidia", device_resource="nvidia.com/gpu")
    cluster = Cluster.objects.create(name="bench")
    Node.objects.create(cluster=cluster, name="n1", flavor=flavor, devices=10_000)
    project = Project.objects.create(organization=Organization.objects.create(name="B", slug="b"), name="P", slug="p")
    Quota.objects.create(project=project, flavor=flavor, guaranteed=10_000)
    user = User.objects.create_user("bench", is_staff=True)
    from tenancy.models import Membership
    Membership.objects.create(project=project, user=user, role="owner")
    step_times = [0.5, 2.0, 5.0, 15.0, 30.0, 60.0, 120.0]
    rows = []
    for step_time in step_times:
        delays = []
        for _ in range(runs):
            start = timezone.now() - timedelta(days=1)
            job = job_submit(actor=user, project=project, spec={
                "name": "hang", "image": "x", "command": ["python"],
                "groups": [{"role": "worker", "replicas": 1, "devices": 1, "flavor": flavor}]}).job
            transition_many([Admission(job.pk, cluster.pk, [{"role": "worker", "index": 0, "node": "n1",
                                                              "devices": 1}])], now=start)
            job = Job.objects.get(pk=job.pk)
            if job.state == State.ADMITTED:  # the eager dispatch task claimed it already
                transition(job, State.DISPATCHING, reason="bench", actor="system", now=start)
            transition(job, State.RUNNING, reason="bench", actor="system", now=start)
            steps_before_hang = rng.randrange(20, 200)
            clock = start + timedelta(seconds=rng.uniform(0, interval))  # the check's phase against the run
            last_step_at = None
            step, t = 0, start
            hung_at = start + timedelta(seconds=steps_before_hang * step_time)
            detected = None
            while detected is None and clock < hung_at + timedelta(seconds=3600):
                while t + timedelta(seconds=step_time) <= min(clock, hung_at):
                    t += timedelta(seconds=step_time)
                    step += 1
                    last_step_at = t
                if last_step_at is not None:
                    Run.objects.filter(job=job).update(last_step=step, last_step_at=last_step_at)
                if check_hangs(clock):
                    detected = clock
                clock += timedelta(seconds=interval)
            delays.append(((detected or clock) - hung_at).total_seconds())
            Job.objects.filter(pk=job.pk).update(state=State.SUCCEEDED)
        goal = 2 * step_time + 60
        rows.append((step_time, statistics.median(delays), max(delays), goal))
    print(f"\nHang detection delay: {runs} simulated hangs per step time, check every {interval:g} s "
          f"(bound max({settings.TIDAL['HANG_STEP_FACTOR']:g} x step time, {settings.TIDAL['HANG_MIN_SECONDS']:g} s))")
    print(f"{'step time':>9} {'median':>8} {'max':>8} {'goal':>8} {'NCCL':>6}  within goal")
    ok = True
    for step_time, median, worst, goal in rows:
        within = worst <= goal
        ok = ok and within
        print(f"{step_time:>8g}s {median:>7.0f}s {worst:>7.0f}s {goal:>7.0f}s {600:>5}s  {'yes' if within else 'NO'}")
    print(f"Progress rows kept: {Progress.objects.count()}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hang-runs", type=int, default=10)
    parser.add_argument("--skip-hangs", action="store_true")
    args = parser.parse_args()
    classification(args.repeat)
    if not args.skip_hangs:
        hang_delays(args.hang_runs)


if __name__ == "__main__":
    main()
