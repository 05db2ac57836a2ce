"""Reads for pools: which pools a user may see, and a pool's figures (now, over 24 h, give-back times), with its
minute samples and give-backs over a chosen span for the chart (the last hour, 24 h or 7 days).

Staff see every pool and every job on it. Anybody else sees a pool that lent to one of their projects in the last
24 h, and only their own projects' jobs on it: another organization's jobs are never shown, not even counted apart
from the pool's totals."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from jobs import ports
from jobs import scheduling as core
from jobs.models import Attempt, Job
from jobs.scheduling.model import split_node_key
from jobs.states import HOLDING
from pools import money
from pools.models import GiveBack, Interference, Pool, PoolSample
from pools.source import SAMPLE_EVERY, pool_figures, pool_nodes
from tenancy.selectors import project_ids_for_user

WINDOW = timedelta(hours=24)
SPANS = {"1h": timedelta(hours=1), "24h": WINDOW, "7d": timedelta(days=7)}  # the chart's, by their names
SERIES_POINTS = 720  # at most, one per column of the chart: a longer span's minutes are averaged


def pools() -> QuerySet[Pool]:
    return Pool.objects.select_related("cluster", "flavor")


def _nodes_of(pool: Pool, inventory: tuple[core.Node, ...]) -> set[str]:
    """The pool's node names as attempts' placements name them (without the cluster)."""
    return {split_node_key(n.name)[1] for n in pool_nodes(pool, inventory)}


def _touches(placement: list[dict], nodes: set[str]) -> int:
    return sum(a["devices"] for a in placement if a["node"] in nodes)


def pools_for_user(user: Any) -> QuerySet[Pool]:
    """The pools `user` may see (see the module)."""
    if not user.is_authenticated:
        return pools().none()
    every = list(pools())
    if user.is_staff or not every:
        return pools()
    since = timezone.now() - WINDOW
    attempts = list(Attempt.objects.filter(job__project__in=project_ids_for_user(user))
                    .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since))
                    .values_list("cluster_id", "placement"))
    inventory = ports.inventory().nodes
    return pools().filter(pk__in=[pool.pk for pool in every
                                  if any(cluster == pool.cluster_id and _touches(placement, _nodes_of(pool, inventory))
                                         for cluster, placement in attempts)])


@dataclass
class Figures:
    name: str
    cluster: str
    flavor: str
    capacity: int
    demand: int
    headroom: int
    lendable: int  # what the pool lends now
    used: int  # what training holds on it now
    lending: bool
    back_at: datetime | None
    given_back_24h: int  # devices
    give_backs_24h: int
    give_back_p50: float | None  # seconds
    give_back_p99: float | None
    # From the minute samples of the last 24 h: device-hours lent, used by training, and serving demanded but could
    # not have (demand beyond what training left it).
    lent_hours_24h: float = 0.0
    used_hours_24h: float = 0.0
    unmet_hours_24h: float = 0.0
    jobs: list[dict[str, Any]] = field(default_factory=list)  # training on tidal capacity now (those shown)
    # What training on its capacity cost over 24 h at the tidal rate, would have at its class's, and saved (the
    # costs app's prices: money.py); None without the costs app.
    saved_24h: dict[str, Any] | None = None
    # Serving's latency over its SLO in the last 24 h (interference.py): when, where, p99 / SLO, unlent until.
    interferences: list[dict[str, Any]] = field(default_factory=list)
    # Over the chart's span (`figures(span=...)`, 24 h unless asked): the minute samples, each the mean of the
    # minutes it stands for once the span holds more than SERIES_POINTS of them, and every give-back begun in it.
    series: list[dict[str, Any]] = field(default_factory=list)
    given_back: list[dict[str, Any]] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (nearest rank: a figure that happened, not an interpolation)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


def figures(pool: Pool, user: Any, *, series: bool = False, span: timedelta = WINDOW) -> Figures:
    now = timezone.now()
    inventory = ports.inventory().nodes
    members = pool_nodes(pool, inventory)
    short = {split_node_key(n.name)[1] for n in members}
    capacity, now_figures = pool_figures(pool, members, now.timestamp())
    held = Job.objects.filter(state__in=list(HOLDING), current_attempt__cluster_id=pool.cluster_id).values_list(
        "id", "name", "project_id", "project__slug", "current_attempt__placement", "priority_class__name")
    shown = None if user.is_staff else set(project_ids_for_user(user).values_list("id", flat=True))
    used, jobs = 0, []
    for job_id, name, project_id, project, placement, priority in held:
        devices = _touches(placement, short)
        used += devices
        if devices and (shown is None or project_id in shown):
            jobs.append({"id": job_id, "name": name, "project": project, "devices": devices,
                         "priority_class": priority})
    since = now - WINDOW
    backs = list(GiveBack.objects.filter(pool=pool, started_at__gt=since))
    seconds = [g.seconds for g in backs if g.seconds is not None]
    result = Figures(
        name=pool.name, cluster=pool.cluster.name, flavor=pool.flavor.name, capacity=capacity,
        demand=now_figures.demand, headroom=now_figures.headroom, lendable=now_figures.lendable, used=used,
        lending=pool.lending,
        back_at=datetime.fromtimestamp(now_figures.back_at, now.tzinfo) if now_figures.back_at else None,
        given_back_24h=sum(g.devices for g in backs), give_backs_24h=len(backs),
        give_back_p50=percentile(seconds, 50), give_back_p99=percentile(seconds, 99), jobs=jobs)
    result.saved_24h = money.saved(pool.name, pool.cluster_id, since, now)
    result.interferences = list(Interference.objects.filter(pool=pool, at__gt=since).values(
        "at", "nodes", "p99_ms", "slo_ms", "until"))
    samples = list(PoolSample.objects.filter(pool=pool, at__gt=since).values(
        "at", "capacity", "demand", "headroom", "lent", "used"))
    hour = SAMPLE_EVERY / timedelta(hours=1)  # what one sample stands for
    result.lent_hours_24h = round(sum(s["lent"] for s in samples) * hour, 2)
    result.used_hours_24h = round(sum(s["used"] for s in samples) * hour, 2)
    result.unmet_hours_24h = round(sum(max(0, s["demand"] - (s["capacity"] - s["used"])) for s in samples) * hour, 2)
    if series:
        if span != WINDOW:
            samples = list(PoolSample.objects.filter(pool=pool, at__gt=now - span).values(
                "at", "capacity", "demand", "headroom", "lent", "used"))
        result.series = averaged(samples, now - span, span)
        result.given_back = [{"at": g.started_at, "devices": g.devices, "seconds": g.seconds}
                             for g in GiveBack.objects.filter(pool=pool, started_at__gt=now - span)]
    return result


def averaged(samples: list[dict[str, Any]], start: datetime, span: timedelta) -> list[dict[str, Any]]:
    """The samples as they are when they are at most SERIES_POINTS; otherwise one per equal slice of the span
    that holds any: its minutes' mean figures (rounded to a tenth of a device), at its last minute."""
    if len(samples) <= SERIES_POINTS:
        return samples
    slices: dict[int, list[dict[str, Any]]] = {}
    for s in samples:
        slices.setdefault(min(SERIES_POINTS - 1, int((s["at"] - start) / span * SERIES_POINTS)), []).append(s)
    return [{"at": group[-1]["at"], **{key: round(sum(s[key] for s in group) / len(group), 1)
                                      for key in ("capacity", "demand", "headroom", "lent", "used")}}
            for _, group in sorted(slices.items())]


@dataclass(frozen=True)
class Lent:
    pool: str
    devices: int  # the job's devices on the pool's nodes
    back_at: datetime | None  # when the pool expects to stop lending (schedule or forecast); None: not known


def lent_to(job: Job) -> list[Lent]:
    """The pools whose capacity the job's open attempt runs on (the job page's panel)."""
    attempt = job.current_attempt
    if attempt is None or attempt.ended_at is not None or attempt.cluster_id is None:
        return []
    candidates = list(pools().filter(cluster_id=attempt.cluster_id, flavor_id=job.flavor_id))
    if not candidates:
        return []
    inventory = ports.inventory().nodes
    found = []
    for pool in candidates:
        members = pool_nodes(pool, inventory)
        devices = _touches(attempt.placement, {split_node_key(n.name)[1] for n in members})
        if devices:
            now = timezone.now()
            back_at = pool_figures(pool, members, now.timestamp())[1].back_at
            found.append(Lent(pool.name, devices, datetime.fromtimestamp(back_at, now.tzinfo) if back_at else None))
    return found

