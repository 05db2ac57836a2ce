"""Scheduler core benchmark: `python bench/bench_scheduler.py` prints a table (not a test: nothing is asserted).

Cluster: 1,000 nodes of 8 devices over 4 flavors and 40 racks (10 racks of 25 nodes per flavor, 2 blocks of 5
racks each), 100 projects in 10 cohorts with guarantees and borrow limits. Jobs: 1 to 8 replicas, 1 to 64
devices in all, mixed priorities, max runtimes and topology constraints.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
import tracemalloc
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jobs.scheduling import (  # noqa: E402
    Assignment,
    IncrementalScheduler,
    Node,
    PendingJob,
    Policy,
    Project,
    Quota,
    ReplicaGroup,
    RunningJob,
    Snapshot,
    Topology,
    run_cycle,
)

FLAVORS = ("nvidia-h100-80gb", "nvidia-a100-40gb", "nvidia-l4", "ascend-910b")
NOW = 1_000_000.0


def make_nodes() -> list[Node]:
    nodes = []
    for i in range(1000):
        flavor_index, k = divmod(i, 250)
        rack = k // 25
        nodes.append(Node(f"node-{i:04d}", FLAVORS[flavor_index], 8, 8, "default", f"f{flavor_index}-b{rack // 5}",
                          f"f{flavor_index}-r{rack}"))
    return nodes


def make_projects(rnd: random.Random) -> tuple[list[Project], list[Quota]]:
    projects = [Project(f"proj-{p:03d}", f"org-{p % 10}", None if p % 7 else 20,
                        rnd.choice([0.0, 3600.0 * 64, 86400.0 * 128])) for p in range(100)]
    quotas = []
    for p, project in enumerate(projects):
        for f in (FLAVORS[p % 4], FLAVORS[(p + 1) % 4]):
            quotas.append(Quota(project.name, f, 40, 40, None if p % 3 else 16))
    return projects, quotas


def make_job(rnd: random.Random, jid: int, projects: list[Project], t: float) -> PendingJob:
    replicas = rnd.randint(1, 8)
    per = rnd.choice([d for d in (1, 2, 4, 8) if d * replicas <= 64])
    p = rnd.randrange(100)
    flavor = FLAVORS[(p + rnd.randint(0, 1)) % 4]
    topology = rnd.choice([Topology.NONE, Topology.NONE, Topology.PREFER_SAME_RACK, Topology.REQUIRE_SAME_RACK,
                           Topology.REQUIRE_SAME_BLOCK])
    return PendingJob(jid, projects[p].name, rnd.choice([100, 500, 500, 1000]), t,
                      (ReplicaGroup("worker", replicas, per, flavor),), rnd.random() < 0.1, topology,
                      rnd.choice([None, 1800.0, 3600.0, 4 * 3600.0, 24 * 3600.0]))


def make_running(rnd: random.Random, nodes: list[Node], projects: list[Project], fill: float) -> tuple[
        list[Node], list[RunningJob]]:
    """Occupy about `fill` of every node with single-node jobs of random projects."""
    free = {n.name: n.devices for n in nodes}
    running = []
    rid = 1_000_000
    for n in nodes:
        while free[n.name] > 8 * (1 - fill):
            d = min(free[n.name], rnd.choice([1, 2, 4, 8]))
            free[n.name] -= d
            p = rnd.randrange(100)
            running.append(RunningJob(rid, projects[p].name, rnd.choice([100, 500, 1000]),
                                      NOW - rnd.uniform(0, 7200), (Assignment("worker", 0, n.name, d),), n.flavor,
                                      rnd.random() < 0.1, 600.0, rnd.choice([None, 3600.0, 7200.0, 14400.0])))
            rid += 1
    return [replace(n, free=free[n.name]) for n in nodes], running


def make_snapshot(pending: int, fill: float, seed: int = 7) -> Snapshot:
    rnd = random.Random(seed)
    nodes = make_nodes()
    projects, quotas = make_projects(rnd)
    running: list[RunningJob] = []
    if fill:
        nodes, running = make_running(rnd, nodes, projects, fill)
    jobs = [make_job(rnd, j, projects, NOW - pending + j) for j in range(1, pending + 1)]
    return Snapshot(NOW, tuple(nodes), tuple(quotas), tuple(projects), tuple(running), tuple(jobs))


def measure(fn, repeat: int) -> tuple[list[float], float]:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return times, peak / 2**20


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    rows = []
    policy = Policy()
    for label, pending, fill in (("full cycle, 10k pending, empty cluster", 10_000, 0.0),
                                 ("full cycle, 10k pending, cluster 75% busy", 10_000, 0.75)):
        snap = make_snapshot(pending, fill)
        times, peak = measure(lambda snap=snap: run_cycle(snap, policy), args.repeat)
        rows.append((label, times, peak, 200.0))
    # Incremental: the previous cycle's state is kept; one job is submitted; the cycle runs again.
    for fill in (0.0, 0.75):
        base = make_snapshot(10_000, fill)
        rnd = random.Random(11)
        projects = list(base.projects)
        sched = IncrementalScheduler(policy)
        sched.cycle(base)
        incremental_times = []
        for k in range(args.repeat * 3):
            snap = replace(base, pending=base.pending + (make_job(rnd, 20_000 + k, projects, NOW),))
            gc.collect()
            t0 = time.perf_counter()
            result = sched.cycle(snap)
            incremental_times.append((time.perf_counter() - t0) * 1000)
            if k == 0:
                assert result == run_cycle(snap, policy), "incremental result differs from run_cycle"
            sched.cycle(base)  # back to the base state (untimed): every sample adds one job to the same queue
        tracemalloc.start()
        sched.cycle(replace(base, pending=base.pending + (make_job(rnd, 30_000, projects, NOW),)))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        busy = "empty cluster" if not fill else "75% busy"
        rows.append((f"incremental, 1 new job on 10k pending, {busy}", incremental_times, peak / 2**20, 10.0))
    for pending in (500, 3000):
        snap = make_snapshot(pending, 0.75, seed=pending)
        times, peak = measure(lambda snap=snap: run_cycle(snap, policy), args.repeat)
        rows.append((f"replay-size cycle, {pending} pending, 75% busy", times, peak, None))
    print(f"{'case':<52} {'median ms':>10} {'p95 ms':>8} {'peak MiB':>9} {'target':>8}  ok")
    for label, times, peak, target in rows:
        med = statistics.median(times)
        verdict = "-" if target is None else ("ok" if med <= target else "FAIL")
        target_s = "-" if target is None else f"{target:.0f} ms"
        print(f"{label:<52} {med:>10.1f} {p95(times):>8.1f} {peak:>9.1f} {target_s:>8}  {verdict}")


if __name__ == "__main__":
    main()
