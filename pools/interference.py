"""Interference: serving reports its p99 latency and its SLO (the p99 target); when the latency is over the SLO, the
nodes it names (none: every node of the pool) lend nothing for the pool's cool-down (`Pool.interference_cooldown`),
and the scheduler's next cycle moves the training on them off: grown replicas go back (their job shrinks), preemptible
jobs are preempted with their grace and queue again for capacity elsewhere. Each moved job's event says "moved off
<node>: serving p99 X ms over its SLO Y ms". A miss closes the nodes whether or not training runs there now (lending
to a node whose serving is over its SLO would only add to it); a report within the SLO changes nothing, and the nodes
lend again when the cool-down ends.

Two doors: Tidal-run services call `report_latency`; serving Tidal does not run sends `p99_latency_ms` and
`latency_slo_ms` (and `nodes`) with its demand through the demand API (api.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from core import wakeup
from core.errors import DomainError
from jobs import ports
from jobs.scheduling.model import split_node_key
from pools.models import Interference, Pool
from pools.source import pool_nodes

MAX_MS = 3_600_000.0  # an hour: anything beyond is a unit mistake


def _milliseconds(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 < value <= MAX_MS:
        raise DomainError(f"Milliseconds, a number above 0 and at most {MAX_MS:g}.", field=field)
    return float(value)


def _pool_node_names(pool: Pool, nodes: object) -> list[str]:
    """The named nodes, each one of the pool's, by name (`serve-1`) or as the scheduler names them
    (`cluster/serve-1`, what `pools.source.pool_nodes` gives); a 400 naming `nodes` otherwise."""
    if not isinstance(nodes, list | tuple) or not nodes or not all(isinstance(n, str) for n in nodes):
        raise DomainError("A list of node names of the pool (leave it out for every node).", field="nodes")
    mine = {split_node_key(n.name)[1] for n in pool_nodes(pool, ports.inventory().nodes)}
    prefix = f"{pool.cluster.name}/"
    nodes = [n.removeprefix(prefix) for n in nodes]
    unknown = sorted(set(nodes) - mine)
    if unknown:
        raise DomainError(f"Not a node of pool {pool.name}: {', '.join(unknown[:5])}.", field="nodes")
    return sorted(set(nodes))


@transaction.atomic
def report_latency(pool: Pool, nodes: Sequence[str] | None, p99_ms: float, slo_ms: float,
                   at: datetime | None = None) -> Interference | None:
    """Serving's p99 latency against its SLO on `nodes` of the pool (None: all of them). Over the SLO: the nodes
    lend nothing until the cool-down ends (recorded, and returned); within it: nothing happens (None)."""
    p99_ms = _milliseconds(p99_ms, "p99_latency_ms")
    slo_ms = _milliseconds(slo_ms, "latency_slo_ms")
    names = [] if nodes is None else _pool_node_names(pool, nodes)
    if p99_ms <= slo_ms:
        return None
    at = at or timezone.now()
    row = Interference.objects.create(pool=pool, at=at, nodes=names, p99_ms=p99_ms, slo_ms=slo_ms,
                                      until=at + timedelta(seconds=pool.interference_cooldown))
    transaction.on_commit(wakeup.wake_scheduler)
    return row
