"""The pools' side of the scheduler port (jobs.ports.pool_source): before a cycle, which nodes each pool holds and
what it lends (demand.py); after it, each give-back opened or closed and a sample of the figures a minute."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase

from django.db.models import Q

from core.hooks import Hook
from jobs import ports
from jobs import scheduling as core
from jobs.scheduling.model import split_node_key
from pools import demand, forecast
from pools.models import GiveBack, Interference, Pool, PoolSample

SAMPLE_EVERY = timedelta(minutes=1)

# Tidal's own services in a pool (the serving app connects it): the devices of their desired replicas and when that
# last rose, or None while the pool has no service.
service_demand: Hook[Callable[[Pool], tuple[int, float] | None]] = Hook("pools.source.service_demand", single=True)


@dataclass(frozen=True)
class Row:
    """One pool's figures this cycle, as recorded."""

    pool_id: int
    capacity: int
    figures: demand.Figures
    held: int  # devices training holds on its nodes before the cycle


def pool_nodes(pool: Pool, nodes: tuple[core.Node, ...]) -> list[core.Node]:
    """The pool's nodes: those of its cluster and flavor its pattern matches, or the last of them (by position)
    holding its device count."""
    mine = [n for n in nodes if n.cluster == pool.cluster.name and n.flavor == pool.flavor.name]
    if pool.node_pattern:
        return [n for n in mine if fnmatchcase(split_node_key(n.name)[1], pool.node_pattern)]
    chosen, total = [], 0
    for n in reversed(mine):
        if total >= (pool.devices or 0):
            break
        chosen.append(n)
        total += n.devices + n.foreign + n.serving
    return chosen


def _forecast(pool: Pool, now: float) -> tuple[int, float] | None:
    """What the pool's history expects serving to demand over the coming give-back time (forecast.py)."""
    since = datetime.fromtimestamp(now - 7 * forecast.DAY, UTC)
    backs = GiveBack.objects.filter(pool=pool, started_at__gt=since, freed_at__isnull=False)
    lead = forecast.lead_time((freed - started).total_seconds()
                              for started, freed in backs.values_list("started_at", "freed_at"))
    stretches = Q()
    for start, end in forecast.windows(now, lead):
        stretches |= Q(at__range=(datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)))
    history = PoolSample.objects.filter(stretches, pool=pool).values_list("at", "demand")
    return forecast.expected(((at.timestamp(), d) for at, d in history), now, lead)


def pending_devices(pool: Pool, members: list[core.Node]) -> int:
    """Devices pending pods Tidal did not create ask for (node sync: `Cluster.pending_foreign`) that would run on
    the pool's nodes: of its flavor's device resource, and a node selector that admits one of its nodes (without a
    selector, only when the pool opts in)."""
    names = {split_node_key(n.name)[1] for n in members}
    return sum(p["devices"] for p in pool.cluster.pending_foreign
               if p["resource"] == pool.flavor.device_resource and names.intersection(p["nodes"])
               and (p["selector"] or pool.pending_without_selector))


def pool_figures(pool: Pool, members: list[core.Node], now: float) -> tuple[int, demand.Figures]:
    """The pool's devices and its figures now, from its settings and every source it uses."""
    capacity = sum(n.devices + n.foreign + n.serving for n in members)
    foreign = sum(n.foreign for n in members) + pending_devices(pool, members) if pool.use_foreign_pods else None
    settings = demand.Settings(capacity, pool.headroom_percent, pool.headroom_floor, pool.time_zone,
                               tuple(pool.schedule), pool.schedule_floor, pool.lending)
    expected = _forecast(pool, now) if pool.use_forecast else None
    services = service_demand.one()(pool) if service_demand.receivers else None
    reading = demand.Reading(pool.demand, pool.demand_at.timestamp() if pool.demand_at else None, foreign,
                             *(expected or (None, None)), *(services or (None, None)))
    return capacity, demand.figures(settings, reading, now)


def closed_nodes(members: list[core.Node], misses: list[Interference]) -> tuple[tuple[str, str], ...]:
    """(node, why) of the pool's nodes in an interference cool-down (`misses`: the pool's, oldest first: the latest
    one's why is told)."""
    why: dict[str, str] = {}
    for miss in misses:
        for n in members:
            name = split_node_key(n.name)[1]
            if not miss.nodes or name in miss.nodes:
                why[n.name] = f"moved off {name}: {miss.why}"
    return tuple(sorted(why.items()))


def read(now: float, nodes: tuple[core.Node, ...], running: tuple[core.RunningJob, ...]) -> ports.PoolReading:
    node_pool: dict[str, str] = {}
    pools, rows = [], []
    misses: dict[int, list[Interference]] = {}
    for miss in Interference.objects.filter(until__gt=datetime.fromtimestamp(now, UTC)).order_by("at", "id"):
        misses.setdefault(miss.pool_id, []).append(miss)
    for pool in Pool.objects.select_related("cluster", "flavor"):
        # A node belongs to the first pool (by name) that claims it.
        members = [n for n in pool_nodes(pool, nodes) if n.name not in node_pool]
        if not members:
            continue
        node_pool.update(dict.fromkeys((n.name for n in members), pool.name))
        capacity, figures = pool_figures(pool, members, now)
        names = {n.name for n in members}
        held = sum(a.devices for job in running for a in job.placement if a.node in names)
        pools.append(core.Pool(pool.name, figures.lendable, figures.back_at,
                               closed_nodes(members, misses.get(pool.pk, []))))
        rows.append(Row(pool.pk, capacity, figures, held))
    return ports.PoolReading(node_pool, tuple(pools), tuple(rows))


def record(now: float, reading: ports.PoolReading) -> None:
    """Open a give-back where training holds more than its pool lends (from the demand change that caused it),
    close the open one where it no longer does; a sample of each pool's figures at most once a minute."""
    at = datetime.fromtimestamp(now, UTC)
    rows: tuple[Row, ...] = reading.details
    open_ = {g.pool_id: g for g in GiveBack.objects.filter(pool_id__in=[r.pool_id for r in rows],
                                                          freed_at__isnull=True)}
    sampled = dict(PoolSample.objects.filter(pool_id__in=[r.pool_id for r in rows], at__gt=at - SAMPLE_EVERY)
                   .values_list("pool_id", "at"))
    samples = []
    for row in rows:
        excess = row.held - row.figures.lendable
        current = open_.get(row.pool_id)
        if excess > 0 and current is None:
            started = datetime.fromtimestamp(min(row.figures.changed_at, now), UTC)
            GiveBack.objects.create(pool_id=row.pool_id, started_at=started, devices=excess)
        elif excess <= 0 and current is not None:
            GiveBack.objects.filter(pk=current.pk).update(freed_at=at)
        if row.pool_id not in sampled:
            # What serving demanded (the forecast left out: the forecast must not feed on itself).
            samples.append(PoolSample(pool_id=row.pool_id, at=at, capacity=row.capacity, demand=row.figures.observed,
                                      headroom=row.figures.headroom, lent=row.figures.lendable, used=row.held))
    PoolSample.objects.bulk_create(samples)
