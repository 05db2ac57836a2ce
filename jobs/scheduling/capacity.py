"""Free capacity index: free devices per node, bucketed by flavor and topology domain.

Why buckets: best fit ("the node with the fewest free devices that still fits, lowest index on ties") is then a
scan over a handful of free counts per leaf domain instead of a scan over every node, and "does a gang of R x D fit
in this rack?" is plain arithmetic over bucket sizes (sum of count[k] * (k // D)), which is exact for identical
replicas. A leaf is (flavor, cluster, block, rack); racks, blocks and clusters are lists of leaves.

Two counters per node: `free` is what placement may use (visible), `hidden` is free capacity a backfill
reservation keeps for its head job. `free + hidden` is the real free capacity.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from .model import Node

LEVELS = ("rack", "block", "cluster")
ZERO_DEVICE_ROOM = 1 << 30  # replicas of 0 devices that fit on any non-empty set of nodes


class Leaf:
    """The schedulable nodes of one flavor in one rack; buckets[k] lists node indexes with k visible free."""

    __slots__ = ("flavor", "cluster", "block", "rack", "buckets", "free", "nodes")

    def __init__(self, flavor: str, cluster: str, block: str, rack: str) -> None:
        self.flavor = flavor
        self.cluster = cluster
        self.block = block
        self.rack = rack
        self.buckets: list[list[int]] = [[]]
        self.free = 0  # visible free devices over the leaf
        self.nodes: list[int] = []


class Domain:
    """A set of leaves of one flavor that a gang may be packed into (a rack, a block or a whole cluster)."""

    __slots__ = ("key", "leaves", "labelled")

    def __init__(self, key: tuple[str, ...], leaves: list[int], labelled: bool) -> None:
        self.key = key
        self.leaves = leaves
        self.labelled = labelled  # False when the rack/block label is empty (cannot satisfy a requirement)


class CapacityIndex:
    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.nodes = nodes
        self.index_of: dict[str, int] = {}
        self.free: list[int] = []
        self.node_flavor: list[str] = [n.flavor for n in nodes]
        self.hidden: list[int] = []
        self.leaf_of: list[int] = []
        self.leaves: list[Leaf] = []
        self.flavor_leaves: dict[str, list[int]] = {}
        self.max_devices: dict[str, int] = {}  # largest schedulable node per flavor
        self.total_devices: dict[str, int] = {}  # allocatable devices of schedulable nodes per flavor
        self.domains: dict[tuple[str, str], list[Domain]] = {}  # (flavor, level) -> domains
        self.whole_room: dict[tuple[int, int], int] = {}  # (leaf, devices) -> replicas fitting when empty
        # Per flavor, over schedulable nodes: real free devices (visible + hidden) and visible free devices, kept
        # up to date by every edit so the arithmetic bounds of placement and preemption are O(1).
        self.actual: dict[str, int] = {}
        self.visible: dict[str, int] = {}
        leaf_ids: dict[tuple[str, str, str, str], int] = {}
        for i, node in enumerate(nodes):
            self.index_of[node.name] = i
            free = max(0, node.free)
            self.free.append(free)
            self.hidden.append(0)
            if not node.schedulable:
                self.leaf_of.append(-1)
                continue
            key = (node.flavor, node.cluster, node.block, node.rack)
            lid = leaf_ids.get(key)
            if lid is None:
                lid = leaf_ids[key] = len(self.leaves)
                self.leaves.append(Leaf(*key))
                self.flavor_leaves.setdefault(node.flavor, []).append(lid)
            leaf = self.leaves[lid]
            self.leaf_of.append(lid)
            size = max(node.devices, free)
            while len(leaf.buckets) <= size:
                leaf.buckets.append([])
            leaf.buckets[free].append(i)  # indexes arrive in increasing order: lists stay sorted
            leaf.free += free
            leaf.nodes.append(i)
            self.actual[node.flavor] = self.actual.get(node.flavor, 0) + free
            self.visible[node.flavor] = self.visible.get(node.flavor, 0) + free
            self.max_devices[node.flavor] = max(self.max_devices.get(node.flavor, 0), node.devices)
            self.total_devices[node.flavor] = self.total_devices.get(node.flavor, 0) + node.devices
        for flavor, lids in self.flavor_leaves.items():
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

    def set_visible(self, i: int, value: int) -> None:
        """Move node i to the bucket of its new visible free count."""
        old = self.free[i]
        if old == value:
            return
        self.free[i] = value
        lid = self.leaf_of[i]
        if lid < 0:
            return
        leaf = self.leaves[lid]
        buckets = leaf.buckets
        bucket = buckets[old]
        del bucket[bisect_left(bucket, i)]
        while len(buckets) <= value:
            buckets.append([])
        insort(buckets[value], i)
        leaf.free += value - old
        self.visible[leaf.flavor] += value - old

    def take(self, i: int, devices: int) -> None:
        lid = self.leaf_of[i]
        if lid >= 0:
            self.actual[self.leaves[lid].flavor] -= devices
        self.set_visible(i, self.free[i] - devices)

    def give(self, i: int, devices: int) -> None:
        lid = self.leaf_of[i]
        if lid >= 0:
            self.actual[self.leaves[lid].flavor] += devices
        self.set_visible(i, self.free[i] + devices)

    def set_hidden(self, i: int, hidden: int) -> None:
        """Keep `hidden` of node i's real free devices out of sight of placement (a backfill reservation)."""
        actual = self.free[i] + self.hidden[i]
        self.hidden[i] = hidden
        self.set_visible(i, actual - hidden)

    # -- queries ----------------------------------------------------------------------------------------------

    def actual_free(self, flavor: str) -> int:
        """Real free devices of a flavor on schedulable nodes, reserved ones included."""
        return self.actual.get(flavor, 0)

    def visible_free(self, flavor: str) -> int:
        return self.visible.get(flavor, 0)

    def replica_room(self, leaf_ids: list[int], devices: int) -> int:
        """How many replicas of `devices` fit on these leaves (exact for identical replicas).

        A 0-device replica (e.g. a CPU-only Ray head) needs a schedulable node of the flavor but no devices: any
        number of them fit wherever the leaves have a node.
        """
        leaves = self.leaves
        if devices <= 0:
            return ZERO_DEVICE_ROOM if any(leaves[lid].nodes for lid in leaf_ids) else 0
        room = 0
        for lid in leaf_ids:
            buckets = leaves[lid].buckets
            for k in range(devices, len(buckets)):
                n = len(buckets[k])
                if n:
                    room += n * (k // devices)
        return room

    def domain_free(self, leaf_ids: list[int]) -> int:
        leaves = self.leaves
        return sum(leaves[lid].free for lid in leaf_ids)
