"""Free capacity index: free devices, CPU and memory per node, nodes bucketed by flavor, topology domain and free
devices.

Why buckets: best fit ("the node with the fewest free devices that still fits, lowest index on ties") is then a
scan over a handful of free counts per leaf domain instead of a scan over every node, and "does a gang of R x D fit
in this rack?" is plain arithmetic over bucket sizes (sum of count[k] * (k // D)), which is exact for identical
replicas. A leaf is (flavor, cluster, block, rack); racks, blocks and clusters are lists of leaves.

CPU and memory: a replica fits on a node only if its devices, CPU and memory all fit there, so a node holds
min(free // D, cpu // C, memory // M) replicas of one shape. Nodes stay bucketed by free devices (jobs are shaped
around them); each bucket also keeps bounds of its nodes' free CPU and memory (`Leaf.bounds`), so "CPU and memory
allow every node of this bucket as many replicas as its devices do" is one comparison, "they allow every node the
same count" (nodes alike, as whole free machines of one kind) two, and the arithmetic above stays exact. Only a
bucket where neither holds is counted node by node, which also makes its bounds exact again. A node that does not
model CPU or memory (allocatable 0: old rows, trace replay) has UNMODELLED of it free: it never limits. A leaf's
room for a shape is remembered until its capacity changes (`leaf_room`): a cycle asks about the same racks for
shape after shape, and an admission changes one or two of them.

Two counters per node and resource: `free` (`cpu`, `mem`) is what placement may use (visible), `hidden`
(`hidden_cpu`, `hidden_mem`) is free capacity a backfill reservation keeps for its head job. Visible plus hidden is
the real free capacity.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from .model import Node

LEVELS = ("rack", "block", "cluster")
ZERO_DEVICE_ROOM = 1 << 30  # replicas of 0 devices that fit on any non-empty set of nodes when nothing else limits
# Free CPU or memory of a node that does not model it: so far above any request (at most a thousand cores or 16 TiB)
# that no number of replicas' requests brings it near one.
UNMODELLED = 1 << 50


def replicas_fitting(free: int, cpu: int, mem: int, devices: int, cpu_req: int, mem_req: int) -> int:
    """Replicas of (devices, cpu_req, mem_req) that fit in these free amounts: the scarcest resource decides.
    A request of 0 does not limit; 0-device replicas limited by nothing fit ZERO_DEVICE_ROOM times."""
    n = free // devices if devices > 0 else ZERO_DEVICE_ROOM
    if cpu_req > 0 and cpu // cpu_req < n:
        n = cpu // cpu_req
    if mem_req > 0 and mem // mem_req < n:
        n = mem // mem_req
    return n


# Leaf.bounds[k]: [lowest, highest] visible free CPU, then [lowest, highest] free memory, of bucket k's nodes.
CPU_LOW, CPU_HIGH, MEM_LOW, MEM_HIGH = range(4)


def no_bounds() -> list[int]:
    """The bounds of an empty bucket: any node narrows them."""
    return [UNMODELLED, 0, UNMODELLED, 0]


class Leaf:
    """The schedulable nodes of one flavor in one rack; buckets[k] lists node indexes with k visible free devices,
    and bounds[k] bounds their visible free CPU and memory (at most the lowest, at least the highest)."""

    __slots__ = ("flavor", "cluster", "block", "rack", "buckets", "bounds", "free", "nodes")

    def __init__(self, flavor: str, cluster: str, block: str, rack: str) -> None:
        self.flavor = flavor
        self.cluster = cluster
        self.block = block
        self.rack = rack
        self.buckets: list[list[int]] = [[]]
        self.bounds: list[list[int]] = [no_bounds()]
        self.free = 0  # visible free devices over the leaf
        self.nodes: list[int] = []

    def grow(self, size: int) -> None:
        while len(self.buckets) <= size:
            self.buckets.append([])
            self.bounds.append(no_bounds())


class Domain:
    """A set of leaves of one flavor that a gang may be packed into (a rack, a block or a whole cluster)."""

    __slots__ = ("key", "leaves", "labelled")

    def __init__(self, key: tuple[str, ...], leaves: list[int], labelled: bool) -> None:
        self.key = key
        self.leaves = leaves
        self.labelled = labelled  # False when the rack/block label is empty (cannot satisfy a requirement)


class CapacityIndex:
    def __init__(self, nodes: tuple[Node, ...], accelerate: bool = True) -> None:
        self.nodes = nodes
        self.accelerate = accelerate  # False: rooms counted node by node, nothing remembered (the plain mode)
        self.node_flavor: list[str] = [n.flavor for n in nodes]
        # Some node models CPU or memory. When none does (trace replay, which builds an index every cycle), nothing
        # keeps CPU and memory bounds: no node's free CPU or memory ever comes near a request, so the initial
        # bounds answer every question.
        self.modelled = any(n.cpu_millis > 0 or n.memory_mib > 0 for n in nodes)
        if self.modelled:
            # Visible free CPU and memory, and allocatable (UNMODELLED where the node does not model them).
            self.cpu = [max(0, n.free_cpu_millis) if n.cpu_millis > 0 else UNMODELLED for n in nodes]
            self.mem = [max(0, n.free_memory_mib) if n.memory_mib > 0 else UNMODELLED for n in nodes]
            self.cpu_alloc = [n.cpu_millis if n.cpu_millis > 0 else UNMODELLED for n in nodes]
            self.mem_alloc = [n.memory_mib if n.memory_mib > 0 else UNMODELLED for n in nodes]
        else:
            self.cpu = [UNMODELLED] * len(nodes)
            self.mem = [UNMODELLED] * len(nodes)
            self.cpu_alloc = [UNMODELLED] * len(nodes)
            self.mem_alloc = [UNMODELLED] * len(nodes)
        self.hidden: list[int] = [0] * len(nodes)
        self.hidden_cpu: list[int] = [0] * len(nodes)
        self.hidden_mem: list[int] = [0] * len(nodes)
        self.leaf_of: list[int] = []
        self.leaves: list[Leaf] = []
        # Per leaf: (devices, cpu, mem) -> replica_room, since its visible capacity last changed (see leaf_room).
        self.leaf_rooms: list[dict[tuple[int, int, int], int]] = []
        self.flavor_leaves: dict[str, list[int]] = {}
        self.max_devices: dict[str, int] = {}  # largest schedulable node per flavor
        self.total_devices: dict[str, int] = {}  # allocatable devices of schedulable nodes per flavor
        self.domains: dict[tuple[str, str], list[Domain]] = {}  # (flavor, level) -> domains
        self.views: dict[tuple[str, str], list] = {}  # (flavor, level) -> placement.DomainView of each domain
        self.whole_room: dict[tuple, int] = {}  # (leaf, devices, cpu, memory) -> replicas fitting when empty
        self.kinds: dict[int, list[tuple[int, int, int, int]]] = {}  # leaf -> its kinds of node (leaf_kinds)
        self.most_room: dict[tuple, int] = {}  # (flavor, topology, devices, cpu, mem) -> see feasibility.most_room
        # Per flavor, over schedulable nodes: real free devices (visible + hidden) and visible free devices, kept
        # up to date by every edit so the arithmetic bounds of placement and preemption are O(1).
        self.actual: dict[str, int] = {}
        self.visible: dict[str, int] = {}
        leaf_ids: dict[tuple[str, str, str, str], int] = {}
        # Devices and the largest node per leaf, summed per flavor after the loop: replay builds an index every
        # cycle, and list slots cost less than four flavor-keyed dict updates per node.
        leaf_devices: list[int] = []
        leaf_largest: list[int] = []
        self.index_of = {node.name: i for i, node in enumerate(nodes)}
        # avoided node names -> their indexes, the leaves all of whose nodes they are, and whether they are the
        # schedulable nodes of those leaves and no other (see node_indexes)
        self.indexes_of: dict[frozenset[str], tuple[frozenset[int], frozenset[int], bool]] = {}
        # Pools (Node.pool): the flavors some pool lends, and per set of nodes a job avoids, that set with every node
        # outside the pools (placement puts preemptible work on lent capacity first).
        self.lent_flavors = {n.flavor for n in nodes if n.pool}
        self.outside_pools = frozenset(n.name for n in nodes if not n.pool) if self.lent_flavors else frozenset()
        self.pools_only: dict[frozenset[str], frozenset[str]] = {}
        self.free = [max(0, node.free) for node in nodes]
        leaves, leaf_of, modelled = self.leaves, self.leaf_of, self.modelled
        for i, node in enumerate(nodes):
            if not node.schedulable:
                leaf_of.append(-1)
                continue
            free = self.free[i]
            key = (node.flavor, node.cluster, node.block, node.rack)
            lid = leaf_ids.get(key)
            if lid is None:
                lid = leaf_ids[key] = len(leaves)
                leaves.append(Leaf(*key))
                self.leaf_rooms.append({})
                self.flavor_leaves.setdefault(node.flavor, []).append(lid)
                leaf_devices.append(0)
                leaf_largest.append(0)
            leaf = leaves[lid]
            leaf_of.append(lid)
            buckets = leaf.buckets
            if len(buckets) <= free or len(buckets) <= node.devices:
                leaf.grow(max(node.devices, free))
            buckets[free].append(i)  # indexes arrive in increasing order: lists stay sorted
            if modelled:
                cpu, mem = self.cpu[i], self.mem[i]
                bounds = leaf.bounds[free]
                bounds[:] = [min(bounds[CPU_LOW], cpu), max(bounds[CPU_HIGH], cpu), min(bounds[MEM_LOW], mem),
                             max(bounds[MEM_HIGH], mem)]
            leaf.free += free
            leaf.nodes.append(i)
            leaf_devices[lid] += node.devices
            if node.devices > leaf_largest[lid]:
                leaf_largest[lid] = node.devices
        for flavor, lids in self.flavor_leaves.items():
            free = sum(self.leaves[lid].free for lid in lids)
            self.actual[flavor] = self.visible[flavor] = free
            self.max_devices[flavor] = max(leaf_largest[lid] for lid in lids)
            self.total_devices[flavor] = sum(leaf_devices[lid] for lid in lids)
            groups: dict[str, dict[tuple[str, ...], list[int]]] = {level: {} for level in LEVELS}
            for lid in lids:
                leaf = self.leaves[lid]
                groups["rack"].setdefault((leaf.cluster, leaf.block, leaf.rack), []).append(lid)
                groups["block"].setdefault((leaf.cluster, leaf.block), []).append(lid)
                groups["cluster"].setdefault((leaf.cluster,), []).append(lid)
            for level, by_key in groups.items():
                self.domains[(flavor, level)] = [
                    Domain(key, ids, level == "cluster" or key[-1] != "") for key, ids in sorted(by_key.items())
                ]

    # -- edits ------------------------------------------------------------------------------------------------

    def set_visible(self, i: int, value: int, cpu: int, mem: int) -> None:
        """Set node i's visible free devices, CPU and memory, moving it to the bucket of its new device count."""
        old = self.free[i]
        if old == value and cpu == self.cpu[i] and mem == self.mem[i]:
            return  # settling reservations sets most nodes to what they are already
        self.cpu[i] = cpu
        self.mem[i] = mem
        self.free[i] = value
        lid = self.leaf_of[i]
        if lid < 0:
            return
        self.leaf_rooms[lid].clear()
        leaf = self.leaves[lid]
        if old != value:
            buckets = leaf.buckets
            bucket = buckets[old]
            del bucket[bisect_left(bucket, i)]
            if not bucket:  # no node left to bound: start afresh
                leaf.bounds[old] = no_bounds()
            if len(buckets) <= value:
                leaf.grow(value)
            insort(buckets[value], i)
            leaf.free += value - old
            self.visible[leaf.flavor] += value - old
        if not self.modelled:
            return
        # Bounds only widen here; a bucket counted node by node gets exact bounds again (_bucket_room).
        bounds = leaf.bounds[value]
        if cpu < bounds[0]:
            bounds[0] = cpu
        if cpu > bounds[1]:
            bounds[1] = cpu
        if mem < bounds[2]:
            bounds[2] = mem
        if mem > bounds[3]:
            bounds[3] = mem

    def take(self, i: int, devices: int, cpu: int = 0, mem: int = 0) -> None:
        lid = self.leaf_of[i]
        if lid >= 0:
            self.actual[self.leaves[lid].flavor] -= devices
        self.set_visible(i, self.free[i] - devices, self.cpu[i] - cpu, self.mem[i] - mem)

    def give(self, i: int, devices: int, cpu: int = 0, mem: int = 0) -> None:
        lid = self.leaf_of[i]
        if lid >= 0:
            self.actual[self.leaves[lid].flavor] += devices
        self.set_visible(i, self.free[i] + devices, self.cpu[i] + cpu, self.mem[i] + mem)

    def set_hidden(self, i: int, hidden: int, cpu: int = 0, mem: int = 0) -> None:
        """Keep `hidden` of node i's real free devices, and `cpu` / `mem` of its real free CPU and memory, out of
        sight of placement (a backfill reservation)."""
        actual = self.free[i] + self.hidden[i]
        actual_cpu = self.cpu[i] + self.hidden_cpu[i]
        actual_mem = self.mem[i] + self.hidden_mem[i]
        self.hidden[i] = hidden
        self.hidden_cpu[i] = cpu
        self.hidden_mem[i] = mem
        self.set_visible(i, actual - hidden, actual_cpu - cpu, actual_mem - mem)

    # -- queries ----------------------------------------------------------------------------------------------

    def actual_free(self, flavor: str) -> int:
        """Real free devices of a flavor on schedulable nodes, reserved ones included."""
        return self.actual.get(flavor, 0)

    def visible_free(self, flavor: str) -> int:
        return self.visible.get(flavor, 0)

    def lends(self, flavors: tuple[str, ...]) -> bool:
        """Whether a pool lends nodes of every one of these flavors."""
        return bool(self.lent_flavors) and all(f in self.lent_flavors for f in flavors)

    def within_pools(self, avoided: frozenset[str]) -> frozenset[str]:
        """These nodes and every node no pool lends: what a job kept to lent capacity avoids (one set per set)."""
        found = self.pools_only.get(avoided)
        if found is None:
            found = self.pools_only[avoided] = avoided | self.outside_pools
        return found

    def node_indexes(self, names: frozenset[str]) -> frozenset[int]:
        """The indexes of those of these nodes the inventory has (the nodes a job avoids, JobInfo.avoid). Found once
        per set: the inventory does not change within a cycle, and every job a pool keeps off its nodes holds the
        same set (pools.Fence), which placement, preemption, reservations and explanations each asked for again."""
        return self._avoided(names)[0]

    def covered_leaves(self, names: frozenset[str]) -> frozenset[int]:
        """The leaves every node of which is among these (a pool's racks, for a job it keeps off its nodes): they
        hold no node such a job may take, so placement passes them by instead of looking at each of their nodes.
        None in the plain mode, which looks at each node (and so proves the answers the same)."""
        return self._avoided(names)[1]

    def avoids_whole_leaves(self, names: frozenset[str]) -> bool:
        """Whether the schedulable nodes among these are exactly the nodes of their covered leaves: room counted
        over the other leaves is then the room of the nodes a job avoiding them may use."""
        return self._avoided(names)[2]

    def _avoided(self, names: frozenset[str]) -> tuple[frozenset[int], frozenset[int], bool]:
        found = self.indexes_of.get(names)
        if found is None:
            index_of, leaf_of = self.index_of, self.leaf_of
            nodes = frozenset(index_of[n] for n in names if n in index_of)
            counted: dict[int, int] = {}
            for i in nodes:
                if leaf_of[i] >= 0:
                    counted[leaf_of[i]] = counted.get(leaf_of[i], 0) + 1
            leaves = frozenset(lid for lid, count in counted.items()
                               if count == len(self.leaves[lid].nodes)) if self.accelerate else frozenset()
            found = self.indexes_of[names] = (nodes, leaves, len(leaves) == len(counted))
        return found

    def node_room(self, i: int, devices: int, cpu: int = 0, mem: int = 0) -> int:
        """Replicas of this shape that fit in node i's visible free capacity."""
        return replicas_fitting(self.free[i], self.cpu[i], self.mem[i], devices, cpu, mem)

    def replica_room(self, leaf_ids: list[int], devices: int, cpu: int = 0, mem: int = 0) -> int:
        """How many replicas of (devices, cpu millicores, mem MiB) fit on these leaves (exact for identical
        replicas).

        A 0-device replica (e.g. a CPU-only Ray head) needs a schedulable node of the flavor but no devices: as
        many fit as CPU and memory allow, any number where they do not limit.
        """
        if devices <= 0:
            return self._zero_device_room(leaf_ids, cpu, mem)
        room = 0
        for lid in leaf_ids:
            room += self.leaf_room(lid, devices, cpu, mem)
        return room

    def leaf_room(self, lid: int, devices: int, cpu: int, mem: int) -> int:
        """replica_room of one leaf (devices > 0), remembered until the leaf's capacity changes: a cycle asks
        about the same racks for shape after shape, and an admission changes one or two of them."""
        if not self.accelerate:
            free, cpus, mems = self.free, self.cpu, self.mem
            return sum(replicas_fitting(free[i], cpus[i], mems[i], devices, cpu, mem) for i in self.leaves[lid].nodes)
        rooms = self.leaf_rooms[lid]
        key = (devices, cpu, mem)
        room = rooms.get(key)
        if room is not None:
            return room
        leaf = self.leaves[lid]
        buckets = leaf.buckets
        room = 0
        if cpu <= 0 and mem <= 0:  # devices alone: arithmetic over bucket sizes
            for k in range(devices, len(buckets)):
                n = len(buckets[k])
                if n:
                    room += n * (k // devices)
        else:
            all_bounds = leaf.bounds
            for k in range(devices, len(buckets)):
                n = len(buckets[k])
                if n:
                    per = k // devices
                    bounds = all_bounds[k]
                    if bounds[CPU_LOW] >= cpu * per and bounds[MEM_LOW] >= mem * per:  # CPU and memory do not limit
                        room += n * per
                        continue
                    # Counts only grow with free CPU and memory: equal at both bounds, equal for every node.
                    low = replicas_fitting(per, bounds[CPU_LOW], bounds[MEM_LOW], 1, cpu, mem)
                    if low == replicas_fitting(per, bounds[CPU_HIGH], bounds[MEM_HIGH], 1, cpu, mem):
                        room += n * low
                    else:
                        room += self._bucket_room(leaf, k, per, cpu, mem)
        rooms[key] = room
        return room

    def has_room(self, leaf_ids: list[int], devices: int, cpu: int, mem: int, need: int) -> bool:
        """replica_room(leaf_ids, devices, cpu, mem) >= need, adding leaves' rooms only until the answer is
        known."""
        if devices <= 0:
            return self.replica_room(leaf_ids, devices, cpu, mem) >= need
        room = 0
        for lid in leaf_ids:
            room += self.leaf_room(lid, devices, cpu, mem)
            if room >= need:
                return True
        return room >= need

    def _bucket_room(self, leaf: Leaf, k: int, per: int, cpu: int, mem: int) -> int:
        """Replicas the nodes of bucket k hold, counted node by node (at most `per` each by devices); the bucket's
        CPU and memory bounds become exact again on the way. Inlined: this is the hot loop when CPU or memory
        limit."""
        cpus, mems = self.cpu, self.mem
        low_cpu = low_mem = UNMODELLED
        high_cpu = high_mem = 0
        room = 0
        for i in leaf.buckets[k]:
            c = cpus[i]
            m = mems[i]
            if c < low_cpu:
                low_cpu = c
            if c > high_cpu:
                high_cpu = c
            if m < low_mem:
                low_mem = m
            if m > high_mem:
                high_mem = m
            n = per
            if cpu > 0 and c // cpu < n:
                n = c // cpu
            if mem > 0 and m // mem < n:
                n = m // mem
            room += n
        leaf.bounds[k] = [low_cpu, high_cpu, low_mem, high_mem]
        return room

    def _zero_device_room(self, leaf_ids: list[int], cpu: int, mem: int) -> int:
        leaves = self.leaves
        if cpu <= 0 and mem <= 0:
            return ZERO_DEVICE_ROOM if any(leaves[lid].nodes for lid in leaf_ids) else 0
        cpus, mems = self.cpu, self.mem
        room = 0
        for lid in leaf_ids:
            for i in leaves[lid].nodes:
                room += replicas_fitting(0, cpus[i], mems[i], 0, cpu, mem)
                if room >= ZERO_DEVICE_ROOM:
                    return ZERO_DEVICE_ROOM
        return room

    def domain_free(self, leaf_ids: list[int]) -> int:
        leaves = self.leaves
        free = 0
        for lid in leaf_ids:  # a loop, not sum() over a generator: placement asks this of rack after rack
            free += leaves[lid].free
        return free

    def leaf_kinds(self, lid: int) -> list[tuple[int, int, int, int]]:
        """The leaf's nodes grouped by what they offer when empty: (allocatable devices, CPU, memory, how many).
        Racks of one kind of machine are one entry, so counting replicas on empty nodes costs one per kind."""
        kinds = self.kinds.get(lid)
        if kinds is None:
            count: dict[tuple[int, int, int], int] = {}
            for i in self.leaves[lid].nodes:
                kind = (self.nodes[i].devices, self.cpu_alloc[i], self.mem_alloc[i])
                count[kind] = count.get(kind, 0) + 1
            kinds = self.kinds[lid] = [(*kind, n) for kind, n in sorted(count.items())]
        return kinds

    def modelled_free(self, flavor: str) -> tuple[int | None, int | None]:
        """Real free CPU and memory over the flavor's schedulable nodes that model them (None: no node does), for
        explanations."""
        cpu = mem = None
        for lid in self.flavor_leaves.get(flavor, ()):
            for i in self.leaves[lid].nodes:
                if self.cpu_alloc[i] != UNMODELLED:
                    cpu = (cpu or 0) + self.cpu[i] + self.hidden_cpu[i]
                if self.mem_alloc[i] != UNMODELLED:
                    mem = (mem or 0) + self.mem[i] + self.hidden_mem[i]
        return cpu, mem
