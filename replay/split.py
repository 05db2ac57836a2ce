"""Split a replay into independent parts and merge the results.

Projects whose jobs and quotas share no flavor cannot affect each other in the core: quotas, borrowing,
placement, backfill reservations and preemption all work per flavor, and fair share depends on a project's
own use. So isolated partitions (one private flavor per project) can be replayed one part at a time. A cycle
costs time proportional to the pending jobs it sees, so eleven small replays are much cheaper than one that
carries every partition's queue through every other partition's events. The one policy that couples
everything is a strict queue with global scope; it is never split.
"""

from __future__ import annotations

from jobs.scheduling.model import Policy
from replay.cluster import ClusterShape, QuotaSet
from replay.trace import Trace


def components(trace: Trace, cluster: ClusterShape, quotas: QuotaSet, policy: Policy) -> list[set[str]]:
    """Groups of flavors that must be replayed together (one group when nothing can be split)."""
    if policy.blocking == "strict" and policy.blocking_scope == "global":
        return [{n.flavor for n in cluster.nodes}]
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    # A project ties together every flavor it uses or holds quota for; projects sharing a flavor share a part.
    by_project: dict[str, set[str]] = {}
    for j in trace.jobs:
        by_project.setdefault(j.project, set()).add(j.flavor)
    for q in quotas.quotas:
        by_project.setdefault(q.project, set()).add(q.flavor)
    for n in cluster.nodes:
        find(n.flavor)
    for flavors in by_project.values():
        first, *rest = sorted(flavors)
        find(first)
        for f in rest:
            union(first, f)
    groups: dict[str, set[str]] = {}
    for f in parent:
        groups.setdefault(find(f), set()).add(f)
    return sorted(groups.values(), key=lambda g: sorted(g))


def restrict(trace: Trace, cluster: ClusterShape, quotas: QuotaSet, flavors: set[str]) -> tuple[
    list[int], Trace, ClusterShape, QuotaSet
]:  # fmt: skip
    """The part of the inputs on `flavors`, with the trace indexes of its jobs."""
    idx = [i for i, j in enumerate(trace.jobs) if j.flavor in flavors]
    sub_trace = Trace(tuple(trace.jobs[i] for i in idx), trace.skipped, trace.source)
    qs = tuple(q for q in quotas.quotas if q.flavor in flavors)
    names = {q.project for q in qs} | {trace.jobs[i].project for i in idx}
    sub_quotas = QuotaSet(qs, tuple(p for p in quotas.projects if p.name in names))
    return idx, sub_trace, ClusterShape(tuple(n for n in cluster.nodes if n.flavor in flavors)), sub_quotas
