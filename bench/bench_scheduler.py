"""Scheduler core benchmark: `python bench/bench_scheduler.py` prints a table (not a test: nothing is asserted).

Cluster: 1,000 nodes of 8 devices over 4 flavors and 40 racks (10 racks of 25 nodes per flavor, 2 blocks of 5
racks each), 100 projects in 10 cohorts with guarantees and borrow limits. Each node has the allocatable CPU and
memory of its kind of machine (90 to 240 cores, 360 GiB to 1.9 TiB). Jobs: 1 to 8 replicas, 1 to 64 devices in
all, mixed priorities, max runtimes and topology constraints; each replica requests CPU and memory in proportion to
its devices: mostly its share of the machine, sometimes half of it, sometimes 1.25 times it (data loading heavy
jobs, for which CPU or memory, not devices, runs out first). `--without-cpu-memory` leaves CPU and memory out
(nodes that do not model them, replicas that request none), as before they were modelled.

Cases:
- "empty": every node idle, 10,000 pending jobs.
- "busy": the cluster was filled to about 75% by the scheduler itself (40 random submissions a minute, one
  run_cycle a minute, over up to an hour, as in steady state); the jobs still waiting then, plus new
  submissions, make the 10,000 pending jobs. Usage is mostly within
  guarantees, some projects borrow idle guarantee, so some reclaim preemption happens.
- "stress": about 75% of every node taken by single-node jobs of random projects, whatever their quotas: most
  projects are far over their guarantee and the others reclaim it, so one cycle preempts well over a thousand
  jobs. Not a state the scheduler produces; it checks that preemption work stays bounded.
- "plain mode": the empty and busy cycles again with every acceleration off (`run_cycle(..., accelerate=False)`):
  how much slower, and whether it decided the same (a third of the runs).
- "next cycle": the busy cycle's next one as the loop runs it: its decisions applied, a minute later 10 running
  jobs ended and 40 were submitted (`next_minute`), in both modes. Issue 27's 100 ms target for cross-cycle parking
  is for this cycle (not landed: docs/scheduling-invariants.md, "Parking between cycles").
- "elastic": the empty and busy cycles again with half the generated jobs of 2 or more replicas elastic
  (`elastic_share`: pending ones may start at half their replicas, running ones run on half to twice theirs, past
  their resize cooldown, so the cycle shrinks and grows them), beside the rigid rows, with the same target.
- "pool and services": the empty and busy cycles again with a tidal pool (issue 30): the last 100 nodes of the
  first flavor, whose inference services' replicas hold half of each node's free devices; the pool lends the rest,
  and one pending job in five is preemptible.
- "replay-size burst": 500 new jobs at once on a cluster filled as in "busy" (many admissions and reclaims).
- "replay-size step": what trace replay runs at most events: the previous cycle's decisions were applied
  (admitted jobs run, victims are pending again) and one job was submitted since.
The core runs as production runs it: compiled to C when `make install` compiled it (the header says which;
`TIDAL_COMPILED_CORE=0` measures its sources instead, docs/performance.md). Times are wall-clock ("ms") and CPU
time of this process ("cpu ms"): the machine is shared, so wall time
includes waiting for a core; the load average is printed with the table. Targets are judged on the median CPU
time.
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
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from itertools import islice

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from core.collector import collector_paused  # noqa: E402
from jobs.scheduling import (  # noqa: E402
    COMPILED,
    Assignment,
    CycleResult,
    Elastic,
    Node,
    PendingJob,
    Policy,
    Pool,
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
from jobs.scheduling.cycle import MAX_RETRIES, Cycle  # noqa: E402
from jobs.scheduling.preemption import MAX_SIMULATIONS  # noqa: E402

FLAVORS = ("nvidia-h100-80gb", "nvidia-a100-40gb", "nvidia-l4", "ascend-910b")
# Allocatable (millicores, MiB) of each flavor's 8-device machine, after system reservations: a DGX H100, a DGX
# A100, a 96-vCPU L4 host, an Atlas 800T A2.
MACHINES = {"nvidia-h100-80gb": (200_000, 1900 * 1024), "nvidia-a100-40gb": (240_000, 1900 * 1024),
            "nvidia-l4": (90_000, 360 * 1024), "ascend-910b": (180_000, 1400 * 1024)}
NOW = 1_000_000.0
ETA_STEPS = 200  # TIDAL_ETA_STEPS' default
MODEL_CPU_MEMORY = True  # --without-cpu-memory: as before CPU and memory were modelled


def make_nodes() -> list[Node]:
    nodes = []
    for i in range(1000):
        flavor_index, k = divmod(i, 250)
        rack = k // 25
        cpu, memory = MACHINES[FLAVORS[flavor_index]] if MODEL_CPU_MEMORY else (0, 0)
        nodes.append(Node(f"node-{i:04d}", FLAVORS[flavor_index], 8, 8, "default", f"f{flavor_index}-b{rack // 5}",
                          f"f{flavor_index}-r{rack}", cpu_millis=cpu, memory_mib=memory, free_cpu_millis=cpu,
                          free_memory_mib=memory))
    return nodes


def requests(jid: int, flavor: str, devices: int) -> tuple[int, int]:
    """(millicores, MiB) a replica of `devices` requests: its share of the machine, half of it or 1.25 times it,
    at most the whole machine. Drawn from the job id alone, so the devices of the job mix stay those of the
    benchmark without CPU and memory."""
    if not MODEL_CPU_MEMORY:
        return 0, 0
    rnd = random.Random(jid)
    cpu, memory = MACHINES[flavor]
    share = max(devices, 1) / 8
    return (min(cpu, int(cpu * share * rnd.choice(SHARES)) // 1000 * 1000),
            min(memory, int(memory * share * rnd.choice(SHARES)) // 1024 * 1024))


SHARES = (0.5, 1.0, 1.0, 1.0, 1.25)  # of a replica's share of its machine (by its devices) it requests


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
                      (ReplicaGroup("worker", replicas, per, flavor, *requests(jid, flavor, per)),),
                      rnd.random() < 0.1, topology, rnd.choice([None, 1800.0, 3600.0, 4 * 3600.0, 24 * 3600.0]))


def requeued(victim: RunningJob, at: float) -> PendingJob:
    """A preempted job pending again, asking for what it held."""
    first = victim.placement[0]
    return PendingJob(victim.id, victim.project, int(victim.priority), at, (ReplicaGroup(
        "worker", len(victim.placement), first.devices, victim.flavor, first.cpu_millis, first.memory_mib),),
        victim.preemptible, Topology.NONE, victim.max_runtime)


def with_free(nodes: Iterable[Node], held: dict[str, list[int]]) -> list[Node]:
    """The nodes with these free (devices, CPU, memory) per node name."""
    return [replace(n, free=held[n.name][0], free_cpu_millis=held[n.name][1], free_memory_mib=held[n.name][2])
            for n in nodes]


def free_of(nodes: Iterable[Node]) -> dict[str, list[int]]:
    return {n.name: [n.free, n.free_cpu_millis, n.free_memory_mib] for n in nodes}


def move(free: dict[str, list[int]], placement: Iterable[Assignment], sign: int) -> None:
    """Give back (sign=1) or take (sign=-1) what a placement holds."""
    for a in placement:
        amounts = free[a.node]
        amounts[0] += sign * a.devices
        amounts[1] += sign * a.cpu_millis
        amounts[2] += sign * a.memory_mib


def make_running(rnd: random.Random, nodes: list[Node], projects: list[Project], fill: float) -> tuple[
        list[Node], list[RunningJob]]:
    """Occupy about `fill` of every node with single-node jobs of random projects."""
    free = free_of(nodes)
    running = []
    rid = 1_000_000
    for n in nodes:
        while free[n.name][0] > 8 * (1 - fill):
            d = min(free[n.name][0], rnd.choice([1, 2, 4, 8]))
            cpu, memory = requests(rid, n.flavor, d)
            cpu, memory = min(cpu, free[n.name][1]), min(memory, free[n.name][2])
            placement = (Assignment("worker", 0, n.name, d, cpu, memory),)
            move(free, placement, -1)
            p = rnd.randrange(100)
            running.append(RunningJob(rid, projects[p].name, rnd.choice([100, 500, 1000]),
                                      NOW - rnd.uniform(0, 7200), placement, n.flavor,
                                      rnd.random() < 0.1, 600.0, rnd.choice([None, 3600.0, 7200.0, 14400.0])))
            rid += 1
    return with_free(nodes, free), running


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
        free = free_of(node_list)
        backlog = by_id.copy()
        for p in result.preemptions:
            victim = running.pop(p.victim_id)
            move(free, victim.placement, 1)
            backlog[victim.id] = requeued(victim, t)
        for adm in result.admits:
            j = backlog.pop(adm.job_id)
            move(free, adm.placement, -1)
            running[j.id] = RunningJob(j.id, j.project, j.priority, t, adm.placement, j.groups[0].flavor,
                                       j.preemptible, 600.0, j.max_runtime)
        node_list = with_free(node_list, free)
        t += 60.0
        if total - sum(f[0] for f in free.values()) >= fill * total:
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


def apply(snap: Snapshot, result: CycleResult, at: float, min_runtime: float = 600.0) -> Snapshot:
    """The snapshot after a cycle's decisions took effect: admitted jobs run (none preempted before `min_runtime`),
    victims are pending again."""
    pending = {j.id: j for j in snap.pending}
    running = {r.id: r for r in snap.running}
    free = free_of(snap.nodes)
    for p in result.preemptions:
        victim = running.pop(p.victim_id)
        move(free, victim.placement, 1)
        pending[victim.id] = requeued(victim, at)
    for adm in result.admits:
        j = pending.pop(adm.job_id)
        move(free, adm.placement, -1)
        running[j.id] = RunningJob(j.id, j.project, j.priority, at, adm.placement, j.groups[0].flavor,
                                   j.preemptible, min_runtime, j.max_runtime)
    return replace(snap, now=at, nodes=tuple(with_free(snap.nodes, free)), running=tuple(running.values()),
                   pending=tuple(pending.values()))


def next_minute(snap: Snapshot, result: CycleResult, seed: int = 11) -> Snapshot:
    """The busy cycle's next one as the loop runs it: the cycle's decisions applied, then a minute later 10 running
    jobs finished and 40 jobs were submitted (the fill's rate)."""
    after = apply(snap, result, NOW + 60.0)
    rnd = random.Random(seed)
    ended = {r.id for r in rnd.sample(after.running, 10)}
    free = free_of(after.nodes)
    for r in after.running:
        if r.id in ended:
            move(free, r.placement, 1)
    projects = list(after.projects)
    new = [make_job(rnd, 800_000 + k, projects, NOW + rnd.uniform(0, 60)) for k in range(40)]
    return replace(after, now=NOW + 60.0, nodes=tuple(with_free(after.nodes, free)),
                   running=tuple(r for r in after.running if r.id not in ended), pending=after.pending + tuple(new))


def elastic_share(snap: Snapshot) -> Snapshot:
    """The snapshot with half its jobs of 2 or more replicas (even ids) elastic: a pending one may start at half its
    replicas (rounded up) and a running one runs on half to twice its replicas, its cooldown over. Its replicas
    above its minimum are grown ones: preemptible use the cycle shrinks first."""
    pending = tuple(replace(j, groups=(replace(j.groups[0], replicas=-(-j.groups[0].replicas // 2),
                                                max_replicas=j.groups[0].replicas),))
                    if j.id % 2 == 0 and j.groups[0].replicas >= 2 else j for j in snap.pending)
    running = []
    for r in snap.running:
        replicas = len(r.placement)
        if r.id % 2 == 0 and replicas >= 2:
            r = replace(r, elastic=(Elastic(r.placement[0].role, -(-replicas // 2), 2 * replicas),),
                        started_at=min(r.started_at, snap.now - r.resize_cooldown))
        running.append(r)
    return replace(snap, pending=pending, running=tuple(running))


def with_pool(snap: Snapshot) -> Snapshot:
    """The snapshot with a tidal pool (docs/pools.md): the last 100 nodes of the first flavor are a pool whose
    inference services' replicas hold half of each node's free devices (Node.serving, as node sync counts them); the
    pool lends the rest, and one pending job in five is preemptible (only they and elastic growth may borrow it)."""
    first = snap.nodes[0].flavor
    members = {n.name for n in [n for n in snap.nodes if n.flavor == first][-100:]}
    nodes, lendable = [], 0
    for n in snap.nodes:
        if n.name in members:
            held = n.free // 2
            n = replace(n, devices=n.devices - held, free=n.free - held, serving=held, pool="serving")
            lendable += n.devices
        nodes.append(n)
    pending = tuple(replace(j, preemptible=True) if j.id % 5 == 0 else j for j in snap.pending)
    return replace(snap, nodes=tuple(nodes), pending=pending, pools=(Pool("serving", lendable),))


def replay_step(pending: int, seed: int) -> Snapshot:
    """A cycle as trace replay runs it at an event: the previous cycle's decisions were applied, one job came."""
    snap = make_snapshot(pending, 0.75, seed=seed)
    snap = apply(snap, run_cycle(snap, Policy()), NOW)
    rnd = random.Random(seed + 1)
    new = make_job(rnd, 900_000, list(snap.projects), NOW + 5.0)
    return replace(snap, now=NOW + 5.0, pending=snap.pending + (new,))


def organization_excess(snap: Snapshot) -> int:
    """Devices organizations hold beyond their projects' guarantees plus the capacity nobody is guaranteed, summed
    over flavors (goal 0): sum over organizations of max(0, held - guaranteed), less the unowned capacity."""
    org = {p.name: p.cohort for p in snap.projects}
    flavor_of = {n.name: n.flavor for n in snap.nodes}
    net: dict[tuple[str, str], int] = {}
    for q in snap.quotas:
        net[(org[q.project], q.flavor)] = net.get((org[q.project], q.flavor), 0) - q.guaranteed
    for r in snap.running:
        for a in r.placement:
            key = (org[r.project], flavor_of[a.node])
            net[key] = net.get(key, 0) + a.devices
    over = 0
    for flavor in FLAVORS:
        total = sum(n.devices for n in snap.nodes if n.flavor == flavor and n.schedulable)
        unowned = max(0, total - sum(q.guaranteed for q in snap.quotas if q.flavor == flavor))
        over += max(0, sum(max(0, n) for (_, f), n in net.items() if f == flavor) - unowned)
    return over


def quiet_rows(policy: Policy) -> list[tuple[str, int, int, int, int, bool, int, int]]:
    """(world, organization excess after a cycle, after a second, preemptions of the second, of them of jobs the
    first admitted, whether the first stopped at its simulation or retry budget, the cycle after which the same cycle
    run again preempts nothing, and the preemptions of jobs an earlier of those cycles admitted): a cycle's decisions
    carried out at once (admitted jobs preemptible at once, victims queued again), then the same cycle again with
    nothing new, until a cycle preempts nothing (at most QUIET_CYCLES)."""
    rows = []
    for fill, name in ((0.0, "empty"), (0.75, "busy 75%")):
        for seed in (7, 8):
            snap = make_snapshot(10_000, fill, seed=seed)
            cycle = Cycle(snap, policy)
            cycle.run()
            first = cycle.result()
            after = apply(snap, first, NOW, min_runtime=0.0)
            second = run_cycle(after, policy)
            admitted = {a.job_id for a in first.admits}
            churn = sum(1 for p in second.preemptions if p.victim_id in admitted)
            quiet, state, result, churned = 1, after, second, churn
            while result.preemptions and quiet < QUIET_CYCLES:
                admitted |= {a.job_id for a in result.admits}
                quiet += 1
                state = apply(state, result, NOW, min_runtime=0.0)
                result = run_cycle(state, policy)
                churned += sum(1 for p in result.preemptions if p.victim_id in admitted)
            at_budget = cycle.state.simulations >= MAX_SIMULATIONS or max(cycle.retries.values()) >= MAX_RETRIES
            rows.append((f"{name}, seed {seed}", organization_excess(after),
                         organization_excess(apply(after, second, NOW, min_runtime=0.0)), len(second.preemptions),
                         churn, at_budget, quiet if not result.preemptions else -1, churned))
    return rows


QUIET_CYCLES = 8  # cycles quiet_rows runs at most until one preempts nothing


def busy_share(snap: Snapshot) -> float:
    return 1 - sum(n.free for n in snap.nodes) / sum(n.devices for n in snap.nodes)


def cpu_share(snap: Snapshot) -> str:
    """', CPU 60% taken' (empty without CPU modelled)."""
    total = sum(n.cpu_millis for n in snap.nodes)
    return f", CPU {1 - sum(n.free_cpu_millis for n in snap.nodes) / total:.0%}" if total else ""


def measure(fn: Callable[[], object], repeat: int) -> tuple[list[float], list[float], float]:
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
    parser.add_argument("--without-cpu-memory", action="store_true",
                        help="nodes that do not model CPU and memory, replicas that request none")
    args = parser.parse_args()
    global MODEL_CPU_MEMORY
    MODEL_CPU_MEMORY = not args.without_cpu_memory
    rows: list[tuple[str, list[float], list[float], float, float | None, str]] = []
    policy = Policy()
    full_cases: list[tuple[str, int, float, bool, float | None]] = [
        ("full cycle, 10k pending, empty", 10_000, 0.0, True, 200.0),
        ("full cycle, 10k pending, busy 75%", 10_000, 0.75, True, 200.0)]
    if not args.quick:
        full_cases.append(("stress: 10k pending, 75% random over-quota", 10_000, 0.75, False, None))
    for label, pending, fill, realistic, target in full_cases:
        snap = make_snapshot(pending, fill, realistic=realistic)
        times, cpu, peak = measure(partial(run_cycle, snap, policy), args.repeat)
        result = run_cycle(snap, policy)
        stats = result.stats
        rows.append((label, times, cpu, peak, target, f"busy {busy_share(snap):.0%}{cpu_share(snap)}, "
                     f"{stats['admitted']} admits, {stats['preempted']} preempted"))
        if realistic:  # the plain mode beside it: the same decisions, found without any acceleration
            plain_times, plain_cpu, plain_peak = measure(
                partial(run_cycle, snap, policy, accelerate=False), max(1, args.repeat // 3))
            same = run_cycle(snap, policy, accelerate=False) == result
            ratio = statistics.median(plain_cpu) / statistics.median(cpu)
            rows.append((f"{label}, plain mode", plain_times, plain_cpu, plain_peak, None,
                         f"{ratio:.1f}x the accelerated CPU; the same decisions, reasons and positions: "
                         f"{'yes' if same else 'NO'}"))
            if fill:  # the cycle after it, as the loop runs it (what cross-cycle parking would make cheaper)
                after = next_minute(snap, result)
                times, cpu, peak = measure(partial(run_cycle, after, policy), args.repeat)
                second = run_cycle(after, policy)
                plain_times, plain_cpu, plain_peak = measure(
                    partial(run_cycle, after, policy, accelerate=False), max(1, args.repeat // 3))
                rows.append(("next cycle after busy 75%", times, cpu, peak, target,
                             f"a minute on: decisions applied, 10 ended, 40 new; {second.stats['admitted']} admits, "
                             f"{second.stats['preempted']} preempted"))
                same = run_cycle(after, policy, accelerate=False) == second
                rows.append(("next cycle after busy 75%, plain mode", plain_times, plain_cpu, plain_peak, None,
                             f"{statistics.median(plain_cpu) / statistics.median(cpu):.1f}x the accelerated CPU; "
                             f"the same decisions, reasons and positions: {'yes' if same else 'NO'}"))
            elastic = elastic_share(snap)
            times, cpu, peak = measure(partial(run_cycle, elastic, policy), args.repeat)
            result = run_cycle(elastic, policy)
            stats = result.stats
            share = sum(1 for j in elastic.pending if j.groups[0].max_replicas is not None) / len(elastic.pending)
            rows.append((f"{label}, elastic", times, cpu, peak, target,
                         f"{share:.0%} of pending and {sum(1 for r in elastic.running if r.elastic)} running jobs "
                         f"elastic; {stats['admitted']} admits, {stats['preempted']} preempted, "
                         f"{len(result.shrinks)} shrinks, {len(result.grows)} grows"))
        if realistic:  # issue 30: the same cycle with a pool whose services hold part of it
            pooled = with_pool(snap)
            times, cpu, peak = measure(partial(run_cycle, pooled, policy), args.repeat)
            result = run_cycle(pooled, policy)
            stats = result.stats
            serving = sum(n.serving for n in pooled.nodes)
            rows.append((f"{label}, pool and services", times, cpu, peak, target,
                         f"100 pool nodes, services hold {serving}, it lends {pooled.pools[0].lendable}, 20% of "
                         f"pending preemptible; {stats['admitted']} admits, {stats['preempted']} preempted"))
    for label, pending, build in (("replay-size burst, 500 new on busy 75%", 500, make_snapshot),
                                  ("replay-size step, 500 pending, busy", 500, replay_step),
                                  ("replay-size step, 3000 pending, busy", 3000, replay_step)):
        snap = build(pending, 0.75, seed=pending) if build is make_snapshot else build(pending, pending)
        times, cpu, peak = measure(partial(run_cycle, snap, policy), args.repeat)
        stats = run_cycle(snap, policy).stats
        rows.append((label, times, cpu, peak, None, f"busy {busy_share(snap):.0%}{cpu_share(snap)}, "
                     f"{stats['pending']} pending, {stats['admitted']} admits, {stats['preempted']} preempted"))
    # Estimated starts: the scheduler run forward (what the loop does after each cycle, within TIDAL_ETA_STEPS
    # simulated cycles and TIDAL_ETA_SECONDS).
    for label, pending in (("forecast, 500 pending, busy", 500), ("forecast, 3000 pending, busy", 3000)):
        snap = replay_step(pending, pending)
        first = run_cycle(snap, policy)
        times, cpu, peak = measure(partial(forecast, snap, policy, ETA_STEPS, first=first), args.repeat)
        starts = forecast(snap, policy, ETA_STEPS, first=first)
        steps = sum(1 for _ in islice(forecast_steps(snap, policy, first), ETA_STEPS))
        rows.append((label, times, cpu, peak, None, f"{steps} simulated cycles, {len(starts)} of "
                     f"{len(snap.pending)} pending jobs given a start"))
    quiet = quiet_rows(policy)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores, "
          f"{args.repeat} runs per case, CPU and memory {'modelled' if MODEL_CPU_MEMORY else 'not modelled'}, "
          f"the core {'compiled' if COMPILED else 'interpreted (TIDAL_COMPILED_CORE=0 or not compiled)'}")
    print(f"{'case':<46} {'median ms':>9} {'p95 ms':>7} {'cpu ms':>7} {'peak MiB':>8} {'target':>7}  ok    what")
    for label, times, cpu, peak, target, what in rows:
        med, med_cpu = statistics.median(times), statistics.median(cpu)
        verdict = "-" if target is None else ("ok" if med_cpu <= target else "FAIL")
        target_s = "-" if target is None else f"{target:.0f} ms"
        print(f"{label:<46} {med:>9.1f} {p95(times):>7.1f} {med_cpu:>7.1f} {peak:>8.1f} "
              f"{target_s:>7}  {verdict:<4}  {what}")
    print("\nOrganizations and quiet cycles (10k pending): devices organizations hold beyond their guarantees and the"
          "\nunowned capacity after each cycle (goal 0), and preemptions when the cycle runs again with nothing new"
          "\n(goal 0 unless the first cycle stopped at its simulation or retry budget: the next does the rest), and"
          "\nof them those of jobs the first cycle admitted (churn; the rest ran before it); then the cycle run again"
          "\nuntil it preempts nothing: after how many cycles (goal: a few), and the churn in all of them. See"
          "\ndocs/performance.md.")
    print(f"{'world':<20} {'excess, 1st':>11} {'excess, 2nd':>11} {'2nd preempts':>12} {'of 1st admits':>13}  "
          f"{'first at budget':<15} {'quiet after':>11} {'churn, all':>10}")
    for world, first_excess, second_excess, preempts, churn, at_budget, settled, churned in quiet:
        print(f"{world:<20} {first_excess:>11} {second_excess:>11} {preempts:>12} {churn:>13}  "
              f"{'yes' if at_budget else 'no':<15} {settled if settled > 0 else f'>{QUIET_CYCLES}':>11} {churned:>10}")

if __name__ == "__main__":
    main()
