"""Scheduler core benchmark: `python bench/bench_scheduler.py` prints a table (not a test: nothing is asserted).

Cluster: 1,000 nodes of 8 devices over 4 flavors and 40 racks (10 racks of 25 nodes per flavor, 2 blocks of 5
racks each), 100 projects in 10 cohorts with guarantees and borrow limits. Jobs: 1 to 8 replicas, 1 to 64
devices in all, mixed priorities, max runtimes and topology constraints.

Cases:
- "empty": every node idle, 10,000 pending jobs.
- "busy": the cluster was filled to about 75% by the scheduler itself (40 random submissions a minute, one
  run_cycle a minute, over up to an hour, as in steady state); the jobs still waiting then, plus new
  submissions, make the 10,000 pending jobs. Usage is mostly within
  guarantees, some projects borrow idle guarantee, so some reclaim preemption happens.
- "stress": about 75% of every node taken by single-node jobs of random projects, whatever their quotas: most
  projects are far over their guarantee and the others reclaim it, so one cycle preempts well over a thousand
  jobs. Not a state the scheduler produces; it checks that preemption work stays bounded.
- "replay-size burst": 500 new jobs at once on a cluster filled as in "busy" (many admissions and reclaims).
- "replay-size step": what trace replay runs at most events: the previous cycle's decisions were applied
  (admitted jobs run, victims are pending again) and one job was submitted since.
Times are wall-clock ("ms") and CPU time of this process ("cpu ms"): the machine is shared, so wall time
includes waiting for a core; the load average is printed with the table.
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
from itertools import islice

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from core.collector import collector_paused  # noqa: E402
from jobs.scheduling import (  # noqa: E402
    Assignment,
    Node,
    PendingJob,
    Policy,
    Project,
    Quota,
    ReplicaGroup,
    RunningJob,
    Snapshot,
    Topology,
    forecast,
    forecast_steps,
    run_cycle,
)

FLAVORS = ("nvidia-h100-80gb", "nvidia-a100-40gb", "nvidia-l4", "ascend-910b")
NOW = 1_000_000.0
ETA_STEPS = 200  # TIDAL_ETA_STEPS' default


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


def fill_by_scheduler(rnd: random.Random, nodes: list[Node], projects: list[Project], quotas: list[Quota],
                      fill: float, policy: Policy) -> tuple[list[Node], list[RunningJob], list[PendingJob]]:
    """Fill the cluster to about `fill` of its devices with jobs the scheduler admitted itself.

    Every minute of the last hour, 40 random jobs are submitted and one cycle runs; admitted jobs start then
    (their min_runtime of 10 minutes has passed by NOW for all but the last ones), victims stop and are
    requeued; jobs not admitted stay pending (returned as the backlog). Stops once `fill` of the devices are in
    use.
    """
    total = sum(n.devices for n in nodes)
    node_list = list(nodes)
    running: dict[int, RunningJob] = {}
    jid = 500_000
    t = NOW - 3600.0
    backlog: dict[int, PendingJob] = {}
    while t < NOW:
        pending = list(backlog.values())
        for _ in range(40):
            jid += 1
            pending.append(replace(make_job(rnd, jid, projects, t - rnd.uniform(0, 60)),
                                   max_runtime=rnd.choice([None, 4 * 3600.0, 24 * 3600.0])))
        snap = Snapshot(t, tuple(node_list), tuple(quotas), tuple(projects), tuple(running.values()),
                        tuple(pending))
        result = run_cycle(snap, policy)
        by_id = {j.id: j for j in pending}
        free = {n.name: n.free for n in node_list}
        backlog = by_id.copy()
        for p in result.preemptions:
            victim = running.pop(p.victim_id)
            for a in victim.placement:
                free[a.node] += a.devices
            backlog[victim.id] = PendingJob(victim.id, victim.project, victim.priority, t, (ReplicaGroup(
                "worker", len(victim.placement), victim.placement[0].devices, victim.flavor),),
                victim.preemptible, Topology.NONE, victim.max_runtime)
        for adm in result.admits:
            j = backlog.pop(adm.job_id)
            for a in adm.placement:
                free[a.node] -= a.devices
            running[j.id] = RunningJob(j.id, j.project, j.priority, t, adm.placement, j.groups[0].flavor,
                                       j.preemptible, 600.0, j.max_runtime)
        node_list = [replace(n, free=free[n.name]) for n in node_list]
        t += 60.0
        if total - sum(free.values()) >= fill * total:
            break
    return node_list, list(running.values()), list(backlog.values())


def make_snapshot(pending: int, fill: float, seed: int = 7, realistic: bool = True) -> Snapshot:
    rnd = random.Random(seed)
    nodes = make_nodes()
    projects, quotas = make_projects(rnd)
    running: list[RunningJob] = []
    backlog: list[PendingJob] = []
    if fill and realistic:
        nodes, running, backlog = fill_by_scheduler(rnd, nodes, projects, quotas, fill, Policy())
        backlog = backlog[:pending]
    elif fill:
        nodes, running = make_running(rnd, nodes, projects, fill)
    # The backlog the fill left (jobs that already waited), then new submissions up to `pending` jobs.
    jobs = backlog + [make_job(rnd, j, projects, NOW - pending + j) for j in range(1, pending - len(backlog) + 1)]
    return Snapshot(NOW, tuple(nodes), tuple(quotas), tuple(projects), tuple(running), tuple(jobs))


def apply(snap: Snapshot, result, at: float) -> Snapshot:
    """The snapshot after a cycle's decisions took effect: admitted jobs run, victims are pending again."""
    pending = {j.id: j for j in snap.pending}
    running = {r.id: r for r in snap.running}
    free = {n.name: n.free for n in snap.nodes}
    for p in result.preemptions:
        victim = running.pop(p.victim_id)
        for a in victim.placement:
            free[a.node] += a.devices
        pending[victim.id] = PendingJob(victim.id, victim.project, victim.priority, at, (ReplicaGroup(
            "worker", len(victim.placement), victim.placement[0].devices, victim.flavor),), victim.preemptible,
            Topology.NONE, victim.max_runtime)
    for adm in result.admits:
        j = pending.pop(adm.job_id)
        for a in adm.placement:
            free[a.node] -= a.devices
        running[j.id] = RunningJob(j.id, j.project, j.priority, at, adm.placement, j.groups[0].flavor,
                                   j.preemptible, 600.0, j.max_runtime)
    return replace(snap, now=at, nodes=tuple(replace(n, free=free[n.name]) for n in snap.nodes),
                   running=tuple(running.values()), pending=tuple(pending.values()))


def replay_step(pending: int, seed: int) -> Snapshot:
    """A cycle as trace replay runs it at an event: the previous cycle's decisions were applied, one job came."""
    snap = make_snapshot(pending, 0.75, seed=seed)
    snap = apply(snap, run_cycle(snap, Policy()), NOW)
    rnd = random.Random(seed + 1)
    new = make_job(rnd, 900_000, list(snap.projects), NOW + 5.0)
    return replace(snap, now=NOW + 5.0, pending=snap.pending + (new,))


def busy_share(snap: Snapshot) -> float:
    return 1 - sum(n.free for n in snap.nodes) / sum(n.devices for n in snap.nodes)


def measure(fn, repeat: int) -> tuple[list[float], list[float], float]:
    """Wall and CPU ms of `fn` per run, with the garbage collector paused as the scheduler's own process
    (`manage.py run_scheduler`) pauses it around each cycle, and the peak memory of one more run."""
    times, cpu = [], []
    for _ in range(repeat):
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        with collector_paused():
            fn()
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return times, cpu, peak / 2**20


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="skip the stress case")
    args = parser.parse_args()
    rows = []
    policy = Policy()
    full_cases = [("full cycle, 10k pending, empty", 10_000, 0.0, True, 200.0),
                  ("full cycle, 10k pending, busy 75%", 10_000, 0.75, True, 200.0)]
    if not args.quick:
        full_cases.append(("stress: 10k pending, 75% random over-quota", 10_000, 0.75, False, None))
    for label, pending, fill, realistic, target in full_cases:
        snap = make_snapshot(pending, fill, realistic=realistic)
        times, cpu, peak = measure(lambda snap=snap: run_cycle(snap, policy), args.repeat)
        stats = run_cycle(snap, policy).stats
        rows.append((label, times, cpu, peak, target,
                     f"busy {busy_share(snap):.0%}, {stats['admitted']} admits, {stats['preempted']} preempted"))
    for label, pending, build in (("replay-size burst, 500 new on busy 75%", 500, make_snapshot),
                                  ("replay-size step, 500 pending, busy", 500, replay_step),
                                  ("replay-size step, 3000 pending, busy", 3000, replay_step)):
        snap = build(pending, 0.75, seed=pending) if build is make_snapshot else build(pending, pending)
        times, cpu, peak = measure(lambda snap=snap: run_cycle(snap, policy), args.repeat)
        stats = run_cycle(snap, policy).stats
        rows.append((label, times, cpu, peak, None, f"busy {busy_share(snap):.0%}, {stats['pending']} pending, "
                     f"{stats['admitted']} admits, {stats['preempted']} preempted"))
    # Estimated starts: the scheduler run forward (what the loop does after each cycle, within TIDAL_ETA_STEPS
    # simulated cycles and TIDAL_ETA_SECONDS).
    for label, pending in (("forecast, 500 pending, busy", 500), ("forecast, 3000 pending, busy", 3000)):
        snap = replay_step(pending, pending)
        first = run_cycle(snap, policy)
        times, cpu, peak = measure(lambda snap=snap, first=first: forecast(snap, policy, ETA_STEPS, first=first),
                                   args.repeat)
        starts = forecast(snap, policy, ETA_STEPS, first=first)
        steps = sum(1 for _ in islice(forecast_steps(snap, policy, first), ETA_STEPS))
        rows.append((label, times, cpu, peak, None, f"{steps} simulated cycles, {len(starts)} of "
                     f"{len(snap.pending)} pending jobs given a start"))
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores, "
          f"{args.repeat} runs per case")
    print(f"{'case':<46} {'median ms':>9} {'p95 ms':>7} {'cpu ms':>7} {'peak MiB':>8} {'target':>7}  ok    what")
    for label, times, cpu, peak, target, what in rows:
        med = statistics.median(times)
        verdict = "-" if target is None else ("ok" if med <= target else "FAIL")
        target_s = "-" if target is None else f"{target:.0f} ms"
        print(f"{label:<46} {med:>9.1f} {p95(times):>7.1f} {statistics.median(cpu):>7.1f} {peak:>8.1f} "
              f"{target_s:>7}  {verdict:<4}  {what}")


if __name__ == "__main__":
    main()
