"""Phase 3, place: gang placement as a tentative edit of free capacity (every replica or none).

Rules, in the order they decide:
- A single replica goes on the best-fit node of its flavor anywhere: the fewest visible free devices that still
  fit, lowest index in `snapshot.nodes` on ties. Leaving big holes alone keeps them for big jobs.
- Revocable work on revocable capacity: a preemptible job (a grown replica of an elastic job is placed as one)
  goes on what pools lend (pools.py) when it fits there by these rules, and anywhere otherwise. Lent capacity is
  the only capacity work that cannot be taken back may not use; put elsewhere, such a job would leave the pool
  idle and take room that such work then has to preempt it for (as Lyra places loaned work on loaned servers).
- A gang is packed into the fewest racks, then blocks, then a whole cluster: at each level the candidate domain
  with the least free capacity that still fits the gang is tried first (best fit again), so a gang never spans
  clusters and a big empty rack is not broken up by a small gang. `require-same-rack` / `require-same-block`
  stop at their level; `prefer-same-rack` and `none` both fall back level by level.
- Inside a domain replicas are placed one by one, biggest first, each best fit. A gang of whole-node replicas
  therefore lands on fully free nodes, lowest index first. When that order fails (a worker took the node whose
  CPU or memory the master needs), its one-replica groups are tried on each node they fit on (_fill).
- A replica fits on a node only if its devices, CPU and memory all fit (capacity.py). Among the nodes with the
  fewest free devices, the lowest index whose free CPU and memory fit wins: replicas of 0 devices (CPU-only jobs,
  Ray heads) fill a node's CPU and memory, then go to the next node, instead of piling onto one node, and on an
  accelerator flavor they go to the nodes with the fewest free devices first, leaving whole nodes to gangs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from .capacity import CPU_LOW, MEM_LOW, CapacityIndex, Domain, replicas_fitting
from .model import PendingJob, ReplicaGroup, Topology
from .shapes import JobInfo

# (group index, replica index, node index, devices, cpu millicores, memory MiB)
Taken = list[tuple[int, int, int, int, int, int]]

_LEVELS: dict[str, tuple[str, ...]] = {
    Topology.NONE: ("rack", "block", "cluster"),
    Topology.PREFER_SAME_RACK: ("rack", "block", "cluster"),
    Topology.REQUIRE_SAME_RACK: ("rack",),
    Topology.REQUIRE_SAME_BLOCK: ("rack", "block"),
}


def best_node(index: CapacityIndex, leaf_ids: list[int], devices: int, avoid: frozenset[int], cpu: int = 0,
              mem: int = 0) -> int | None:
    """Best fit: smallest visible free device count >= devices, then lowest node index, among nodes with `cpu`
    millicores and `mem` MiB free."""
    best_k = -1
    best_i = -1
    leaves = index.leaves
    cpus, mems = index.cpu, index.mem
    for lid in leaf_ids:
        leaf = leaves[lid]
        buckets = leaf.buckets
        top = len(buckets) - 1 if best_k < 0 else min(len(buckets) - 1, best_k)
        for k in range(devices, top + 1):
            bucket = buckets[k]
            if not bucket:
                continue
            bounds = leaf.bounds[k]
            if cpu > bounds[CPU_LOW] or mem > bounds[MEM_LOW]:  # some node of the bucket may lack CPU or memory
                found = next((i for i in bucket if cpus[i] >= cpu and mems[i] >= mem and i not in avoid), -1)
                if found < 0:
                    continue
            elif avoid:
                found = next((i for i in bucket if i not in avoid), -1)
                if found < 0:
                    continue
            else:
                found = bucket[0]
            if best_k < 0 or k < best_k or found < best_i:
                best_k, best_i = k, found
            break
    return best_i if best_k >= 0 else None


def undo(index: CapacityIndex, taken: Taken) -> None:
    for _, _, i, devices, cpu, mem in reversed(taken):
        index.give(i, devices, cpu, mem)


Groups = Sequence[tuple[int, ReplicaGroup]]  # (the group's index in the job, the group), in placement order


def _fill(index: CapacityIndex, info: JobInfo, per_flavor: dict[str, list[int]], avoid: frozenset[int]) -> Taken | None:
    """Every replica in the domain, or None (nothing taken). One by one in placement order, each best fit, which
    is exact for identical replicas (each takes one of its node's room, wherever it goes), not across groups: a
    group placed first may take the one node a later group's CPU or memory needs. So when that fails, the
    one-replica groups (a master, a launcher) are tried on every node they fit on (best fit first), the last group
    then placed one by one again: exact for up to two such groups beside one group of identical replicas, so that
    room given back never makes a gang of that shape stop fitting (preemption's search relies on it)."""
    groups = list(info.groups)
    taken = _fill_in_order(index, groups, per_flavor, avoid)
    if taken is not None or len(groups) == 1:
        return taken
    last = [g for g in groups if g[1].replicas > 1] or groups[-1:]
    tried = [g for g in groups if g not in last]
    if len(last) > 1 or len(tried) > 2:
        return None  # beyond the shapes above, the greedy order's answer
    return _fill_each_way(index, tried, last, per_flavor, avoid)


def _fill_in_order(index: CapacityIndex, groups: Groups, per_flavor: dict[str, list[int]],
                   avoid: frozenset[int]) -> Taken | None:
    taken: Taken = []
    for gi, group in groups:
        leaves = per_flavor[group.flavor]
        for r in range(group.replicas):
            i = best_node(index, leaves, group.devices, avoid, group.cpu_millis, group.memory_mib)
            if i is None:
                undo(index, taken)
                return None
            index.take(i, group.devices, group.cpu_millis, group.memory_mib)
            taken.append((gi, r, i, group.devices, group.cpu_millis, group.memory_mib))
    return taken


def _fill_each_way(index: CapacityIndex, tried: Groups, last: Groups, per_flavor: dict[str, list[int]],
                   avoid: frozenset[int]) -> Taken | None:
    """The first group of `tried` (one replica) on each node it fits on, best fit first, the rest placed after it
    the same way; None (nothing taken) when no way fits. Nodes of the same free devices, CPU and memory are tried
    once: the rest fits beside one of them exactly when it fits beside the other."""
    if not tried:  # counted first (exact for one group: CapacityIndex.has_room), the fill only where it succeeds
        return _fill_in_order(index, last, per_flavor, avoid) if _has_room(index, last, per_flavor) else None
    (gi, group), rest = tried[0], tried[1:]
    failed: set[tuple[int, int, int]] = set()
    for i in nodes_fitting(index, per_flavor[group.flavor], group, avoid):
        room = (index.free[i], index.cpu[i], index.mem[i])
        if room in failed:
            continue
        index.take(i, group.devices, group.cpu_millis, group.memory_mib)
        more = _fill_each_way(index, rest, last, per_flavor, avoid)
        if more is not None:
            return [(gi, 0, i, group.devices, group.cpu_millis, group.memory_mib), *more]
        index.give(i, group.devices, group.cpu_millis, group.memory_mib)
        failed.add(room)
    return None


def nodes_fitting(index: CapacityIndex, leaf_ids: list[int], group: ReplicaGroup, avoid: frozenset[int]) -> list[int]:
    """The nodes of these leaves a replica of the group fits on, best fit first: fewest visible free devices, then
    lowest index."""
    cpus, mems = index.cpu, index.mem
    found = [(k, i) for lid in leaf_ids for k, bucket in enumerate(index.leaves[lid].buckets) if k >= group.devices
             for i in bucket if cpus[i] >= group.cpu_millis and mems[i] >= group.memory_mib and i not in avoid]
    return [i for _, i in sorted(found)]


DomainView = tuple[tuple[str, ...], dict[str, list[int]], bool]  # (key, leaves per flavor, labelled)


def _domains(index: CapacityIndex, info: JobInfo, level: str) -> list[DomainView]:
    """Domains of this level that have nodes of every flavor the job asks for."""
    if len(info.flavors) == 1:
        flavor = info.flavors[0]
        views = index.views.get((flavor, level))
        if views is None:  # built once per cycle: every placement of the flavor asks for them (not edited)
            views = index.views[(flavor, level)] = [(d.key, {flavor: d.leaves}, d.labelled)
                                                    for d in index.domains.get((flavor, level), ())]
        return views
    merged: dict[tuple[str, ...], tuple[dict[str, list[int]], bool]] = {}
    for n, flavor in enumerate(info.flavors):
        for d in index.domains.get((flavor, level), ()):
            if n == 0:
                merged[d.key] = ({flavor: d.leaves}, d.labelled)
            elif d.key in merged:
                merged[d.key][0][flavor] = d.leaves
    return [(key, per, labelled) for key, (per, labelled) in sorted(merged.items()) if len(per) == len(info.flavors)]


def _free_enough(index: CapacityIndex, info: JobInfo, per_flavor: dict[str, list[int]]) -> int:
    """Free devices of the domain if each flavor has as many free as the job asks for, else -1."""
    total = 0
    for flavor, need in info.demand.items():
        free = index.domain_free(per_flavor[flavor])
        if free < need:
            return -1
        total += free
    return total


def _has_room(index: CapacityIndex, groups: Groups, per_flavor: dict[str, list[int]]) -> bool:
    """Every group has room for its replicas in the domain, each counted alone (necessary; exact for one group)."""
    for _, group in groups:
        if not index.has_room(per_flavor[group.flavor], group.devices, group.cpu_millis, group.memory_mib,
                              group.replicas):
            return False
    return True


def _could_fit(index: CapacityIndex, info: JobInfo, per_flavor: dict[str, list[int]], covered: frozenset[int]) -> int:
    """Free devices of the domain if it passes the necessary checks, else -1."""
    total = _free_enough(index, info, per_flavor)
    return total if total >= 0 and _has_room(index, info.groups, _usable(per_flavor, covered)) else -1


def _usable(per_flavor: dict[str, list[int]], covered: frozenset[int]) -> dict[str, list[int]]:
    """The domain's leaves less those the job avoids every node of (CapacityIndex.covered_leaves): room there is
    none of its, so its necessary checks and its fill leave them out, deciding as if they looked at each node."""
    if not covered:
        return per_flavor
    return {flavor: [lid for lid in leaves if lid not in covered] for flavor, leaves in per_flavor.items()}


def place(index: CapacityIndex, job: PendingJob, info: JobInfo) -> Taken | None:
    """Place every replica of `job` (the takes are applied; `undo` reverts them) or return None, changing nothing."""
    if job.preemptible and index.lends(info.flavors):
        taken = _place(index, job, info, index.within_pools(info.avoid))
        if taken is not None:
            return taken
    return _place(index, job, info, info.avoid)


def _place(index: CapacityIndex, job: PendingJob, info: JobInfo, avoided: frozenset[str]) -> Taken | None:
    avoid = index.node_indexes(avoided) if avoided else frozenset()
    covered = index.covered_leaves(avoided) if avoid else frozenset()
    for flavor, need in info.demand.items():
        if index.visible_free(flavor) < need:
            return None
    if info.replicas == 1:
        gi, group = info.groups[0]
        cpu, mem = group.cpu_millis, group.memory_mib
        leaves = index.flavor_leaves.get(group.flavor, [])
        if covered:
            leaves = [lid for lid in leaves if lid not in covered]
        i = best_node(index, leaves, group.devices, avoid, cpu, mem)
        if i is None:
            return None
        index.take(i, group.devices, cpu, mem)
        return [(gi, 0, i, group.devices, cpu, mem)]
    # Early exit: racks and blocks are parts of a cluster, so a gang no cluster could hold fits nowhere.
    clusters = [per for _, per, _ in _domains(index, info, "cluster") if _could_fit(index, info, per, covered) >= 0]
    if not clusters:
        return None
    if len(clusters) == 1 and job.topology in (Topology.NONE, Topology.PREFER_SAME_RACK) and len(
            index.domains.get((info.flavors[0], "rack"), ())) == 1 and len(info.flavors) == 1:
        # One rack per cluster (no topology labels): rack, block and cluster are the same set of nodes.
        return _fill(index, info, _usable(clusters[0], covered), avoid)
    required = job.topology in (Topology.REQUIRE_SAME_RACK, Topology.REQUIRE_SAME_BLOCK)
    tried: set[tuple[int, ...]] = set()
    for level in _LEVELS.get(job.topology, _LEVELS[Topology.NONE]):
        candidates = []
        for key, per_flavor, labelled in _domains(index, info, level):
            if required and not labelled:
                continue
            if job.topology == Topology.REQUIRE_SAME_BLOCK and key[1] == "":
                continue  # a rack outside any labelled block cannot satisfy the block requirement
            free = _free_enough(index, info, per_flavor)
            if free >= 0:
                candidates.append((free, key, per_flavor))
        candidates.sort(key=lambda c: (c[0], c[1]))
        # Best fit: the least free domain that has room. Room is counted only in that order, up to the first
        # domain that has it (a gang admitted usually fits the first or second of ten racks).
        for _, _, per_flavor in candidates:
            usable = _usable(per_flavor, covered)
            if not _has_room(index, info.groups, usable):
                continue
            signature = tuple(sorted(lid for leaves in usable.values() for lid in leaves))
            if signature in tried:
                continue
            tried.add(signature)
            taken = _fill(index, info, usable, avoid)
            if taken is not None:
                return taken
    return None


_LOOSEST = {Topology.REQUIRE_SAME_RACK: "rack", Topology.REQUIRE_SAME_BLOCK: "block"}


def allowed_domains(index: CapacityIndex, topology: Topology, flavor: str, replicas: int) -> Iterator[Domain]:
    """The domains of a flavor that a gang of this many replicas may be placed in, at the loosest level its
    topology allows (which contains every tighter candidate); place() puts a single replica anywhere."""
    level = _LOOSEST.get(topology, "cluster") if replicas > 1 else "cluster"
    no_block = replicas > 1 and topology == Topology.REQUIRE_SAME_BLOCK
    for d in index.domains.get((flavor, level), ()):
        if not ((level != "cluster" and not d.labelled) or (no_block and d.key[1] == "")):
            yield d


def fits_by_count(index: CapacityIndex, job: PendingJob, info: JobInfo, hidden: Iterable[int] = ()) -> bool | None:
    """Would `place` succeed, were the capacity reservations keep hidden on nodes `hidden` visible? Told by counting
    alone (some domain the topology allows has room for every replica), which is exact for identical replicas of
    one flavor and no nodes to avoid, or nodes to avoid that fill whole leaves (a pool's racks: the room of the
    other leaves is then the room of the nodes it may use); None for other jobs. Changes nothing (no reservation
    lifted and settled)."""
    shape = info.shape
    if shape is None or len(info.flavors) != 1:  # a shape: identical replicas
        return None
    covered: frozenset[int] = frozenset()
    if info.avoid:
        if not index.avoids_whole_leaves(info.avoid):
            return None
        covered = index.covered_leaves(info.avoid)
    flavor, devices, replicas, cpu, mem = shape.flavor, shape.devices, shape.replicas, shape.cpu, shape.memory
    gain = _hidden_gain(index, hidden, flavor, devices, cpu, mem)
    for d in allowed_domains(index, job.topology, flavor, replicas):
        leaves = [lid for lid in d.leaves if lid not in covered] if covered else d.leaves
        more = sum(gain.get(lid, 0) for lid in leaves) if gain else 0
        if index.has_room(leaves, devices, cpu, mem, replicas - more):
            return True
    return False


def _hidden_gain(index: CapacityIndex, nodes: Iterable[int], flavor: str, devices: int, cpu: int,
                 mem: int) -> dict[int, int]:
    """Replicas per leaf that the hidden capacity of these nodes would add."""
    gain: dict[int, int] = {}
    hidden, hidden_cpu, hidden_mem = index.hidden, index.hidden_cpu, index.hidden_mem
    for i in nodes:
        lid = index.leaf_of[i]
        if lid < 0 or index.leaves[lid].flavor != flavor:
            continue
        if not (hidden[i] or hidden_cpu[i] or hidden_mem[i]):
            continue  # a reservation's node its ending jobs already cover: nothing hidden there
        free, cpus, mems = index.free[i], index.cpu[i], index.mem[i]
        more = (replicas_fitting(free + hidden[i], cpus + hidden_cpu[i], mems + hidden_mem[i], devices, cpu, mem)
                - replicas_fitting(free, cpus, mems, devices, cpu, mem))
        if more:
            gain[lid] = gain.get(lid, 0) + more
    return gain


def max_room(index: CapacityIndex, info: JobInfo, level: str) -> int:
    """Replicas of the job's biggest group that fit in the roomiest domain of a level (for explanations)."""
    return group_room(index, info.groups[0][1], level)


def group_room(index: CapacityIndex, group: ReplicaGroup, level: str, cpu: bool = True, mem: bool = True) -> int:
    """Replicas of a group that fit in the roomiest domain of a level (for explanations); with cpu / mem False,
    as if CPU / memory did not limit."""
    cpu_req = group.cpu_millis if cpu else 0
    mem_req = group.memory_mib if mem else 0
    best = 0
    for d in index.domains.get((group.flavor, level), ()):
        if level != "cluster" and not d.labelled:
            continue
        best = max(best, index.replica_room(d.leaves, group.devices, cpu_req, mem_req))
    return best
