"""Small builders and the invariants every cycle result must satisfy (shared by scenario and property tests)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from jobs.scheduling import (
    Assignment,
    CycleResult,
    Node,
    PendingJob,
    Policy,
    Project,
    ReplicaGroup,
    RunningJob,
    Snapshot,
    Topology,
    run_cycle,
)
from jobs.scheduling.shapes import JobInfo, requeued

A100 = "nvidia-a100-40gb"
H100 = "nvidia-h100-80gb"


def nodes(count: int, flavor: str = A100, devices: int = 8, free: int | None = None, prefix: str = "n",
          rack_size: int = 0, block_size: int = 0, cluster: str = "default", start: int = 0, cpu: int = 0,
          memory: int = 0) -> tuple[Node, ...]:
    """`count` nodes named {prefix}{i}; racks of `rack_size` nodes (r0, r1, ...), blocks of `block_size` racks;
    `cpu` millicores and `memory` MiB allocatable each, all free (0: not modelled)."""
    out = []
    for k in range(start, start + count):
        rack = f"{prefix}r{k // rack_size}" if rack_size else ""
        block = f"{prefix}b{k // (rack_size * block_size)}" if rack_size and block_size else ""
        out.append(Node(f"{prefix}{k}", flavor, devices, devices if free is None else free, cluster, block, rack,
                        cpu_millis=cpu, memory_mib=memory, free_cpu_millis=cpu, free_memory_mib=memory))
    return tuple(out)


def job(id: int, project: str = "vision", replicas: int = 1, devices: int = 8, flavor: str = A100,
        priority: int = 500, submitted_at: float | None = None, cpu: int = 0, memory: int = 0, **kw) -> PendingJob:
    """`cpu` millicores and `memory` MiB per replica."""
    return PendingJob(id, project, priority, float(id) if submitted_at is None else submitted_at,
                      (ReplicaGroup("worker", replicas, devices, flavor, cpu, memory),), **kw)


def running(id: int, project: str, placement: dict[str, int], flavor: str = A100, priority: int = 500,
            started_at: float = 0.0, cpu: int = 0, memory: int = 0, **kw) -> RunningJob:
    """One replica per node of `placement` (node -> devices), each requesting `cpu` millicores and `memory` MiB."""
    assignments = tuple(Assignment("worker", k, node, d, cpu, memory) for k, (node, d) in enumerate(placement.items()))
    return RunningJob(id, project, priority, started_at, assignments, flavor, **kw)


def occupy(node_list: tuple[Node, ...], jobs: list[RunningJob]) -> tuple[Node, ...]:
    """Nodes with the devices, CPU and memory of these running jobs taken (so snapshots stay consistent)."""
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for rj in jobs:
        for a in rj.placement:
            taken = used[a.node]
            taken[0] += a.devices
            taken[1] += a.cpu_millis
            taken[2] += a.memory_mib
    return tuple(replace(n, free=n.free - used[n.name][0], free_cpu_millis=n.free_cpu_millis - used[n.name][1],
                         free_memory_mib=n.free_memory_mib - used[n.name][2]) if n.name in used else n
                 for n in node_list)


def snapshot(node_list, pending=(), running_jobs=(), quotas=(), projects=None, now: float = 1000.0) -> Snapshot:
    running_jobs = list(running_jobs)
    if projects is None:
        names = sorted({q.project for q in quotas} | {j.project for j in pending} | {r.project for r in running_jobs})
        projects = tuple(Project(n, "org") for n in names)
    return Snapshot(now, occupy(tuple(node_list), running_jobs), tuple(quotas), tuple(projects),
                    tuple(running_jobs), tuple(pending))


def carry_out(snap: Snapshot, result: CycleResult, now: float) -> Snapshot:
    """The next snapshot at `now` once a cycle's decisions are carried out: victims gone, admitted jobs running
    where they were placed, nothing new submitted."""
    pending = {j.id: j for j in snap.pending}
    gone = {p.victim_id for p in result.preemptions}
    still = [r for r in snap.running if r.id not in gone]
    for adm in result.admits:
        j = pending.pop(adm.job_id)
        still.append(RunningJob(j.id, j.project, j.priority, snap.now, adm.placement, j.groups[0].flavor,
                                preemptible=j.preemptible, max_runtime=j.max_runtime))
    return rebuilt(snap, still, tuple(pending.values()), now)


def as_pending(victim: RunningJob, snap: Snapshot) -> PendingJob:
    """A job preempted in the cycle of `snap`, as it waits again (the core's own reading of it)."""
    return requeued(victim, {n.name: n.flavor for n in snap.nodes}, snap.now)


def rebuilt(snap: Snapshot, running_jobs, pending, now: float) -> Snapshot:
    """The snapshot's cluster and quotas at `now` with these running and pending jobs (free devices, CPU and memory
    recomputed)."""
    empty = tuple(replace(n, free=n.devices, free_cpu_millis=n.cpu_millis, free_memory_mib=n.memory_mib)
                  for n in snap.nodes)
    return Snapshot(now, occupy(empty, running_jobs), snap.quotas, snap.projects, tuple(running_jobs),
                    tuple(pending))


def admitted(result: CycleResult) -> list[int]:
    return [a.job_id for a in result.admits]


def waits(result: CycleResult) -> dict[int, object]:
    return {w.job_id: w for w in result.waits}


def victims(result: CycleResult) -> list[int]:
    return sorted(p.victim_id for p in result.preemptions)


def check_invariants(snap: Snapshot, result: CycleResult, policy: Policy) -> None:
    """Assertions that hold for every cycle on every input."""
    by_node = {n.name: n for n in snap.nodes}
    pending = {j.id: j for j in snap.pending}
    run = {r.id: r for r in snap.running}
    # Every pending job is decided exactly once; with explanations off under strict blocking, the jobs behind a
    # blocked head are not evaluated and get no Wait: exactly those the full explanation calls "blocked".
    decided = [a.job_id for a in result.admits] + [w.job_id for w in result.waits]
    assert len(decided) == len(set(decided)), "no job is admitted or waits twice"
    undecided = set(pending) - set(decided)
    if policy.explain or policy.blocking != "strict":
        assert sorted(decided) == sorted(pending), "every pending job is admitted or waits, once"
    elif policy.waits:
        full = run_cycle(snap, replace(policy, explain=True))
        assert undecided == {w.job_id for w in full.waits if w.code == "blocked"}, "exactly the blocked jobs left out"
    victim_ids = [p.victim_id for p in result.preemptions]
    assert len(victim_ids) == len(set(victim_ids))
    admitted_ids = {a.job_id for a in result.admits}
    assert not admitted_ids & {r.job_id for r in result.reservations}, "an admitted job keeps no reservation"
    # Capacity: nobody over-allocated in devices, CPU or memory; victims give theirs back.
    free = {n.name: n.free for n in snap.nodes}
    cpu = {n.name: n.free_cpu_millis for n in snap.nodes}
    mem = {n.name: n.free_memory_mib for n in snap.nodes}
    given_back = [a for v in victim_ids for a in run[v].placement] + [a for s in result.shrinks for a in s.removed]
    for a in given_back:
        if a.node in free:
            free[a.node] += a.devices
            cpu[a.node] += a.cpu_millis
            mem[a.node] += a.memory_mib
    for a in (a for g in result.grows for a in g.placement):
        assert by_node[a.node].schedulable
        free[a.node] -= a.devices
        cpu[a.node] -= a.cpu_millis
        mem[a.node] -= a.memory_mib
    check_elastic(snap, result, policy)
    check_pools(snap, result)
    for adm in result.admits:
        j = pending[adm.job_id]
        # Gang: every replica of every group with its requests, each on one schedulable node of its flavor, one
        # cluster.
        expected = sorted((g.role, k, g.devices, g.cpu_millis, g.memory_mib, g.flavor) for g in j.groups
                          for k in range(g.replicas))
        got = sorted((a.role, a.index, a.devices, a.cpu_millis, a.memory_mib, by_node[a.node].flavor)
                     for a in adm.placement)
        assert got == expected, f"job {j.id} placed partially, on the wrong flavor or without its requests"
        assert len({by_node[a.node].cluster for a in adm.placement}) == 1, "a gang spans clusters"
        requests = {g.role: g for g in j.groups}  # what each replica's pod will request
        for a in adm.placement:
            node = by_node[a.node]
            assert node.schedulable and a.node not in j.avoid_nodes
            free[a.node] -= a.devices
            cpu[a.node] -= requests[a.role].cpu_millis
            mem[a.node] -= requests[a.role].memory_mib
        if len(adm.placement) == 1:
            continue  # one replica is always in one rack and one block
        if j.topology == Topology.REQUIRE_SAME_RACK:
            racks = {(by_node[a.node].cluster, by_node[a.node].block, by_node[a.node].rack) for a in adm.placement}
            assert len(racks) == 1 and "" not in next(iter(racks))[2:], f"job {j.id} not in one rack"
        if j.topology == Topology.REQUIRE_SAME_BLOCK:
            blocks = {(by_node[a.node].cluster, by_node[a.node].block) for a in adm.placement}
            assert len(blocks) == 1 and next(iter(blocks))[1] != "", f"job {j.id} not in one block"
    for name, f in free.items():
        node = by_node[name]
        assert f >= 0 or f >= node.free, f"node {name} over-allocated"
        # Nodes that do not model CPU or memory (allocatable 0) never limit them.
        assert node.cpu_millis <= 0 or cpu[name] >= min(0, node.free_cpu_millis), f"node {name} CPU over-allocated"
        assert node.memory_mib <= 0 or mem[name] >= min(0, node.free_memory_mib), (
            f"node {name} memory over-allocated")
    # Preemption rules.
    guar = defaultdict(int)
    blim = defaultdict(int)
    for q in snap.quotas:
        guar[(q.project, q.flavor)] += q.guaranteed
        blim[(q.project, q.flavor)] += q.borrow_limit
    start_used = defaultdict(int)
    for r in snap.running:
        if not r.preemptible:
            start_used[(r.project, r.flavor)] += sum(a.devices for a in r.placement)
    # A project borrows, for reclaim, by the jobs it runs now, those admitted in the cycle included: at most its
    # start usage and every pending job of its; and a job admitted and given back later in the cycle is one of those
    # that did not stay admitted.
    may_use, admitted_use = defaultdict(int), defaultdict(int)
    not_admitted: dict[tuple[str, str], list[int]] = defaultdict(list)
    for j in snap.pending:
        if j.preemptible:
            continue
        for flavor, devices in JobInfo(j, avoid=frozenset()).demand.items():
            may_use[(j.project, flavor)] += devices
            if j.id in admitted_ids:
                admitted_use[(j.project, flavor)] += devices
            else:
                not_admitted[(j.project, flavor)].append(devices)
    reclaimed: dict[tuple[str, str], list[int]] = defaultdict(list)  # (project, flavor) -> devices of its victims
    for p in result.preemptions:
        if p.for_job_id is None:  # its pool took its capacity back (check_pools)
            continue
        victim, preemptor = run[p.victim_id], pending[p.for_job_id]
        if policy.quotas and victim.project != preemptor.project and not victim.preemptible:
            reclaimed[(victim.project, victim.flavor)].append(sum(a.devices for a in victim.placement))
        assert p.for_job_id in admitted_ids, "a preemptor is admitted in the same cycle"
        assert not preemptor.preemptible
        assert snap.now >= victim.started_at + victim.min_runtime, "preempted before min_runtime"
        if victim.project == preemptor.project:
            assert victim.priority < preemptor.priority, "equal or higher priority job preempted in its project"
        elif policy.quotas:
            key = (victim.project, victim.flavor)
            assert victim.preemptible or start_used[key] + may_use[key] > guar[key], (
                "a job within its project's guarantee preempted by another project")
        else:
            assert victim.preemptible and victim.priority < preemptor.priority
    # Reclaim takes a lender's jobs (or gives back its jobs of this cycle) only while it borrows: it ends above its
    # guarantee less one of them.
    for key, sizes in reclaimed.items():
        assert start_used[key] + admitted_use[key] - sum(sizes) > guar[key] - max(sizes + not_admitted[key]), (
            f"{key} reclaimed below its guarantee")
    # Quota: no project newly above guarantee + borrow limit.
    if policy.quotas:
        used_after = defaultdict(int)
        pre_after = defaultdict(int)
        used_before = defaultdict(int)
        pre_before = defaultdict(int)
        for r in snap.running:
            d = sum(a.devices for a in r.placement)
            (pre_before if r.preemptible else used_before)[(r.project, r.flavor)] += d
            if r.id not in victim_ids:
                (pre_after if r.preemptible else used_after)[(r.project, r.flavor)] += d
        touched = set()
        for s in result.shrinks:
            r = run[s.job_id]
            (pre_after if r.preemptible else used_after)[(r.project, r.flavor)] -= sum(a.devices for a in s.removed)
        for g in result.grows:
            r = run[g.job_id]
            pre_after[(r.project, r.flavor)] += sum(a.devices for a in g.placement)
            touched.add((r.project, r.flavor))
        for adm in result.admits:
            j = pending[adm.job_id]
            for g in j.groups:
                d = g.replicas * g.devices
                (pre_after if j.preemptible else used_after)[(j.project, g.flavor)] += d
                touched.add((j.project, g.flavor))
        for key in touched:
            b = blim[key] if policy.borrowing else 0
            # Preemptible jobs use their project's idle guarantee first, like any job.
            after = max(0, used_after[key] + pre_after[key] - guar[key])
            before = max(0, used_before[key] + pre_before[key] - guar[key])
            assert after <= max(b, before), f"{key} borrows {after} over its limit {b}"
    # Backfill: nothing admitted this cycle delays a reservation, in devices, CPU or memory.
    now = {"devices": free, "CPU": cpu, "memory": mem}
    for res in result.reservations:
        need = _amounts(res.placement)
        ends: dict[str, dict[str, int]] = {what: defaultdict(int) for what in now}
        for r in snap.running:
            if r.id not in victim_ids and r.max_runtime is not None and max(r.started_at + r.max_runtime,
                                                                            snap.now) <= res.start:
                _add(ends, r.placement)
        for adm in result.admits:
            j = pending[adm.job_id]
            if j.max_runtime is not None and snap.now + j.max_runtime <= res.start:
                _add(ends, adm.placement)
        for what, per_node in need.items():
            for node, n in per_node.items():
                if what != "devices" and (by_node[node].cpu_millis if what == "CPU" else by_node[node].memory_mib) <= 0:
                    continue
                assert now[what][node] + ends[what][node] >= n, (
                    f"reservation of job {res.job_id} delayed on {node} ({what})")


def check_elastic(snap: Snapshot, result: CycleResult, policy: Policy) -> None:
    """Elastic jobs: shrinks take grown replicas only, never below the minimum, never from a job preempted or
    grown in the same cycle; growth never beyond the maximum, only past the cooldown, never into a flavor a job
    that passed its quota waits for capacity of."""
    run = {r.id: r for r in snap.running}
    by_node = {n.name: n for n in snap.nodes}
    preempted = {p.victim_id for p in result.preemptions}
    shrunk = {s.job_id for s in result.shrinks}
    grown = {g.job_id for g in result.grows}
    assert not shrunk & preempted and not shrunk & grown and not grown & preempted
    for s in result.shrinks:
        job = run[s.job_id]
        minimum = {e.role: e.min_replicas for e in job.elastic}
        assert s.removed and all(a in job.placement and a.index >= minimum[a.role] for a in s.removed)
    for job_id in shrunk:
        job = run[job_id]
        removed = {a for s in result.shrinks if s.job_id == job_id for a in s.removed}
        for e in job.elastic:
            left = sum(1 for a in job.placement if a.role == e.role and a not in removed)
            assert left >= e.min_replicas, f"job {job_id} shrunk below its minimum"
    for g in result.grows:
        job = run[g.job_id]
        assert snap.now >= (job.resized_at or job.started_at) + job.resize_cooldown, "grown within its cooldown"
        for e in job.elastic:
            after = sum(1 for a in (*job.placement, *g.placement) if a.role == e.role)
            assert after <= e.max_replicas, f"job {job.id} grown beyond its maximum"
        indexes = [(a.role, a.index) for a in (*job.placement, *g.placement)]
        assert len(indexes) == len(set(indexes)), "a grown replica reuses an index"
        clusters = {by_node[a.node].cluster for a in (*job.placement, *g.placement) if a.node in by_node}
        assert len(clusters) <= 1, f"job {job.id} grown into another cluster"
        if policy.waits:
            short = {by_node[a.node].flavor for a in g.placement}
            assert not any(w.code in ("capacity", "reclaim") and pending_flavors(snap, w.job_id) & short
                           for w in result.waits), "grown ahead of a job waiting for capacity"


def check_pools(snap: Snapshot, result: CycleResult) -> None:
    """Pools: a job that is not preemptible is never placed on a pool's node; once the cycle's decisions are carried
    out, training holds no more of a pool than it lends, beyond what nothing may take back (jobs that are not
    preemptible, bases of elastic jobs); what goes back to a pool is preemptible or grown, and no more than it must
    (each victim but the last of a pool was still needed)."""
    lendable = {p.name: p.lendable for p in snap.pools}
    pool_of = {n.name: n.pool for n in snap.nodes if n.pool in lendable}
    pending = {j.id: j for j in snap.pending}
    for adm in result.admits:
        if not pending[adm.job_id].preemptible:
            assert not any(a.node in pool_of for a in adm.placement), f"job {adm.job_id} placed on a pool's node"
    gone = {p.victim_id for p in result.preemptions}
    removed = {(s.job_id, a) for s in result.shrinks for a in s.removed}
    held: dict[str, int] = defaultdict(int)
    fixed: dict[str, int] = defaultdict(int)  # what no give-back may take: not preemptible, not a grown replica
    for r in snap.running:
        minimum = {e.role: e.min_replicas for e in r.elastic}
        for a in r.placement:
            if a.node in pool_of and r.id not in gone and (r.id, a) not in removed:
                held[pool_of[a.node]] += a.devices
                if not r.preemptible and a.index < minimum.get(a.role, a.index + 1):
                    fixed[pool_of[a.node]] += a.devices
    for a in [a for g in result.grows for a in g.placement] + [a for adm in result.admits for a in adm.placement]:
        if a.node in pool_of:
            held[pool_of[a.node]] += a.devices
    for pool, limit in lendable.items():
        assert held[pool] <= max(limit, fixed[pool]), f"pool {pool} lends {held[pool]} of {limit}"
    # A closed node (Pool.closed) keeps only what nothing may take back: no preemptible job or grown replica stays,
    # nothing new comes.
    closed = {node for p in snap.pools for node, _ in p.closed if node in pool_of}
    for r in snap.running:
        minimum = {e.role: e.min_replicas for e in r.elastic}
        for a in r.placement:
            may_go = r.preemptible or a.index >= minimum.get(a.role, a.index + 1)
            if a.node in closed and may_go and r.id not in gone:
                assert (r.id, a) in removed, f"job {r.id} stays on closed node {a.node}"
    for a in [a for g in result.grows for a in g.placement] + [a for adm in result.admits for a in adm.placement]:
        assert not (a.devices and a.node in closed), f"devices placed on closed node {a.node}"
    run = {r.id: r for r in snap.running}
    for p in result.preemptions:
        if p.for_job_id is None:
            victim = run[p.victim_id]
            assert victim.preemptible, "a pool took back a job that is not preemptible"
            assert any(a.node in pool_of for a in victim.placement), "a pool took back a job not on its nodes"


def pending_flavors(snap: Snapshot, job_id: int) -> set[str]:
    return {g.flavor for j in snap.pending if j.id == job_id for g in j.groups}


def _amounts(placement) -> dict[str, dict[str, int]]:
    """Devices, CPU and memory per node of a placement."""
    out: dict[str, dict[str, int]] = {"devices": defaultdict(int), "CPU": defaultdict(int), "memory": defaultdict(int)}
    _add(out, placement)
    return out


def _add(out: dict[str, dict[str, int]], placement) -> None:
    for a in placement:
        out["devices"][a.node] += a.devices
        out["CPU"][a.node] += a.cpu_millis
        out["memory"][a.node] += a.memory_mib
