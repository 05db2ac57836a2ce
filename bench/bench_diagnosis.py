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

3. Effective training time of a 1,024-GPU job (128 nodes of 8, from a pool of 144) over 54 days in a
   fault-injection replay at Meta's published rate for Llama 3 (419 interruptions in 54 days over 16,384 GPUs,
   about 78% hardware; the mix below follows the paper's table of root causes). Each injected failure is a case
   of the labelled corpus of its class, diagnosed by the production rules (`reliability.rules.diagnose`); its
   retry is decided by production's `jobs.failures.decide_retry`, the nodes a retry avoids and the quarantine as
   `reliability.services` decides them (`TIDAL_QUARANTINE_FAILURES` in `TIDAL_QUARANTINE_WINDOW`, or at once).
   A hardware fault leaves its node faulty (it fails again, mean 3 h, while the job runs there) with a
   probability per class. With the platform: automatic retry from the checkpoint on other nodes, quarantine.
   Without: a person notices each failure and resubmits, the job lands anywhere in the pool, a faulty node is
   taken out by hand after its third failure. Productive time / wall time, median of the replays. Goal with them:
   at least 95%.

    .venv/bin/python bench/bench_diagnosis.py [--repeat 5] [--skip-hangs] [--replays 20] [--skip-replay]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from reliability import corpus, rules

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


# Llama 3's 419 unexpected interruptions in 54 days (Dubey et al. 2024, table 5), by the class each shows as:
# faulty GPU, GPU system processor and thermal faults as a GPU fallen off the bus; HBM3 and SRAM as memory/ECC;
# network switch/cable and NIC as NCCL/network errors; host maintenance, SSD, power supply, chassis, IO board, CPU
# and host memory as a node lost; software bugs as user errors; silent data corruption as a NaN loss; a dependency
# as a data/storage error.
META_MIX = {"xid_bus": 148 + 17 + 6, "xid_memory": 72 + 19, "nccl": 35 + 7, "node_lost": 32 + 3 + 3 + 2 + 2 + 2 + 2,
            "user_error": 54, "nccl_timeout": 7, "loss_nan": 6, "data_error": 2}
META_INTERRUPTIONS, META_DAYS, META_GPUS = 419, 54, 16_384
# How likely a hardware fault leaves its node faulty (it fails again), and how soon it does while the job runs there.
FAULTY_AFTER = {"xid_bus": 0.7, "xid_memory": 0.5}
FAULTY_MTBF_H = 3.0
NODE_REPAIR_H = 24.0  # a node lost, or taken out of service, is back (repaired) after this
# Until a failure stops the job: NCCL's watchdog (600 s) for the faults under a collective, the node-lost grace.
DETECTION_S = {"xid_bus": 600.0, "xid_memory": 600.0, "nccl": 600.0, "nccl_timeout": 600.0, "node_lost": 40.0}
MANUAL_REMOVAL_AFTER = 3  # without quarantine: failures on one node before an operator takes it out


@dataclass
class Replay:
    """One 54-day replay: hours by where they went."""

    productive: float = 0.0
    lost_work: float = 0.0  # since the last checkpoint, and until the failure was detected
    restarting: float = 0.0  # rescheduling, pods starting, the checkpoint loading
    waiting: float = 0.0  # for a person, or for enough healthy nodes
    failures: int = 0
    repeats: int = 0  # failures of a node already faulty
    quarantined: int = 0
    misdiagnosed: int = 0

    @property
    def ratio(self) -> float:
        return self.productive / (self.productive + self.lost_work + self.restarting + self.waiting)


def replay(platform: bool, rng: random.Random, compiled: rules.Compiled, corpus_cases: dict[str, list[corpus.Case]],
           tidal: dict[str, Any], *, days: float, gpus: int, pool: int, checkpoint_h: float, restart_h: float,
           human_h: float) -> Replay:
    from jobs.failures import HARDWARE, INFRA, decide_retry, kind_of
    from reliability.rules import QUARANTINE_NOW

    nodes_needed = gpus // 8
    rate_h = META_INTERRUPTIONS / (META_DAYS * 24) * gpus / META_GPUS  # interruptions per hour of the job
    classes, weights = zip(*META_MIX.items(), strict=True)
    out = Replay()
    faulty: dict[int, str] = {}  # node -> the class it keeps failing with
    failed_on: dict[int, list[float]] = defaultdict(list)  # node -> failure times (quarantine's count)
    out_until: dict[int, float] = {}  # node -> back in service at (lost, quarantined, taken out)
    avoid: set[int] = set()  # the job's avoided nodes (production: Job.avoid_nodes)
    retries = infra_retries = 0
    t, horizon = 0.0, days * 24
    while t < horizon:
        usable = [n for n in range(pool) if out_until.get(n, 0.0) <= t and n not in avoid]
        if len(usable) < nodes_needed:
            avoid.clear()  # nowhere else to go: production's scheduler would wait; the job's own list yields first
            usable = [n for n in range(pool) if out_until.get(n, 0.0) <= t]
        if len(usable) < nodes_needed:
            wait = min(out_until[n] for n in out_until if out_until[n] > t) - t
            out.waiting += wait
            t += wait
            continue
        placed = rng.sample(usable, nodes_needed)
        for n in placed:  # a node back from repair is healthy
            if out_until.pop(n, None) is not None:
                faulty.pop(n, None)
        out.restarting += restart_h
        t += restart_h
        # The next failure: the background rate, or a faulty node under the job failing again.
        ran = rng.expovariate(rate_h)
        node, truth = rng.choice(placed), rng.choices(classes, weights)[0]
        for n in placed:
            if n in faulty and (again := rng.expovariate(1 / FAULTY_MTBF_H)) < ran:
                ran, node, truth = again, n, faulty[n]
        repeat = node in faulty and faulty[node] == truth
        if t + ran >= horizon:
            out.productive += horizon - t
            break
        detect = DETECTION_S.get(truth, 0.0) / 3600
        lost = ran % checkpoint_h
        out.productive += ran - lost
        out.lost_work += lost + detect
        t += ran + detect
        out.failures += 1
        out.repeats += repeat
        if truth in FAULTY_AFTER and node not in faulty and rng.random() < FAULTY_AFTER[truth]:
            faulty[node] = truth
        if truth == "node_lost":
            out_until[node] = t + NODE_REPAIR_H
        failed_on[node].append(t)
        found = rules_diagnose(compiled, corpus_cases, truth, rng)
        out.misdiagnosed += found.cause != truth
        if not platform:
            if len(failed_on[node]) >= MANUAL_REMOVAL_AFTER and node not in out_until:
                out_until[node] = t + NODE_REPAIR_H
            wait = rng.expovariate(1 / human_h)
            out.waiting += wait
            t += wait
            continue
        kind = kind_of(found.cause)
        if kind in (HARDWARE, INFRA):
            avoid.add(node)  # the failed replica's node (reliability.services.verdict)
        if kind == HARDWARE and tidal["QUARANTINE_ENABLED"] and node not in out_until:
            window = [at for at in failed_on[node] if at >= t - tidal["QUARANTINE_WINDOW"] / 3600]
            if found.quarantine == QUARANTINE_NOW or len(window) >= tidal["QUARANTINE_FAILURES"]:
                out_until[node] = t + NODE_REPAIR_H  # staff release it repaired
                failed_on[node].clear()
                out.quarantined += 1
        decision = decide_retry(found.cause, exit_code=None, permanent_exit_codes=(), retries_used=retries,
                                retry_limit=3, infra_retries_used=infra_retries,
                                infra_retry_limit=tidal["INFRA_RETRY_LIMIT"])
        if decision.retry:
            retries += decision.counted
            infra_retries += not decision.counted
            continue
        retries = infra_retries = 0  # a person fixes what needs fixing and submits the job again
        wait = rng.expovariate(1 / human_h)
        out.waiting += wait
        t += wait
    return out


def rules_diagnose(compiled: rules.Compiled, corpus_cases: dict[str, list[corpus.Case]], truth: str,
                   rng: random.Random) -> rules.Diagnosis:
    from reliability import rules

    return rules.diagnose(rng.choice(corpus_cases[truth]).evidence, compiled)


class Shape(TypedDict):
    """The replayed job and its pool: replay()'s keyword arguments."""

    days: float
    gpus: int
    pool: int
    checkpoint_h: float
    restart_h: float
    human_h: float


def effective_training_time(replays: int, *, checkpoint_min: float, restart_min: float, human_min: float,
                            seed: int = 28) -> bool:
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-0123456789abcdef0123")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    from django.conf import settings

    from reliability import corpus, rules

    tidal = settings.TIDAL
    by_label: dict[str, list] = defaultdict(list)
    for case in corpus.cases():
        by_label[case.label].append(case)
    compiled = rules.ruleset()
    shape: Shape = {"days": META_DAYS, "gpus": 1024, "pool": 144, "checkpoint_h": checkpoint_min / 60,
             "restart_h": restart_min / 60, "human_h": human_min / 60}
    print(f"\nEffective training time: 1,024 GPUs (128 nodes, pool of 144) for {META_DAYS} days at Meta's rate "
          f"({META_INTERRUPTIONS * 1024 / META_GPUS:.1f} interruptions expected), {replays} replays; checkpoint "
          f"every {checkpoint_min:g} min, restart {restart_min:g} min, a person answers in {human_min:g} min "
          f"(mean)")
    print(f"{'':<34} {'ratio':>7} {'p10':>7} {'fails':>6} {'repeat':>6} {'quar.':>5} {'misdx':>5} "
          f"{'lost h':>7} {'restart h':>9} {'wait h':>7} {'CPU s':>6}")
    results = {}
    for platform, name in ((False, "without quarantine, auto retry"), (True, "with quarantine and auto retry")):
        rng = random.Random(seed)
        cpu = time.process_time()
        runs = [replay(platform, rng, compiled, by_label, tidal, **shape) for _ in range(replays)]
        cpu = time.process_time() - cpu
        ratios = sorted(r.ratio for r in runs)
        results[platform] = statistics.median(ratios)

        def mid(attr: str, runs: list[Replay] = runs) -> float:
            value: float = statistics.median(getattr(r, attr) for r in runs)
            return value

        print(f"{name:<34} {results[platform]:>7.2%} {ratios[len(ratios) // 10]:>7.2%} {mid('failures'):>6.0f} "
              f"{mid('repeats'):>6.0f} {mid('quarantined'):>5.0f} {mid('misdiagnosed'):>5.0f} "
              f"{mid('lost_work'):>7.1f} {mid('restarting'):>9.1f} {mid('waiting'):>7.1f} {cpu / replays:>6.2f}")
    ok = results[True] >= 0.95
    print(f"goal with them >= 95%: {'met' if ok else 'NOT met'} ({results[True]:.2%}; without: {results[False]:.2%})")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hang-runs", type=int, default=10)
    parser.add_argument("--skip-hangs", action="store_true")
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--checkpoint-minutes", type=float, default=30.0)
    parser.add_argument("--restart-minutes", type=float, default=10.0)
    parser.add_argument("--human-minutes", type=float, default=60.0)
    parser.add_argument("--skip-replay", action="store_true")
    args = parser.parse_args()
    classification(args.repeat)
    if not args.skip_replay:
        effective_training_time(args.replays, checkpoint_min=args.checkpoint_minutes,
                                restart_min=args.restart_minutes, human_min=args.human_minutes)
    if not args.skip_hangs:
        hang_delays(args.hang_runs)


if __name__ == "__main__":
    main()
