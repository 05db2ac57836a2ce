"""The autoscaler's tick (every INTERVAL seconds: Celery beat, or an embedded loop in `make run`): for each service,
read its metric, apply the HPA rules (autoscale.py), record the sample and any scale event, and count its ready
replicas.

Ready replicas: on Kubernetes, the Deployment's (dispatch.py). On a simulated cluster, the replicas that fit, one per
node, in the devices of the pool's nodes that training does not hold, the pool's last nodes first (where the
scheduler keeps what a pool does not lend, jobs/scheduling/pools.py): so a replica becomes ready once the give-back
its scale-up caused has freed its devices.
"""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from itertools import groupby

from django.conf import settings

from clusters.models import Cluster
from jobs import ports
from jobs import scheduling as core
from jobs.models import Job
from jobs.scheduling.model import split_node_key
from jobs.states import HOLDING
from pools.models import Pool
from pools.source import pool_nodes
from serving import autoscale, dispatch, services
from serving.models import ScaleEvent, Service, ServiceSample
from telemetry import prometheus

INTERVAL = 5.0
STALE = 180.0  # a pushed metric older than this is missing: push at least every minute
HISTORY = timedelta(hours=24)  # samples the service page shows


def tick(now: float | None = None) -> int:
    """One pass over every service; how many changed their desired replicas."""
    now = time.time() if now is None else now
    at = datetime.fromtimestamp(now, UTC)
    nodes = ports.inventory().nodes
    rows = Service.objects.select_related("pool__cluster", "pool__flavor", "project__organization").order_by(
        "pool_id", "created_at", "id")
    changed = 0
    for _, group in groupby(rows, key=lambda s: s.pool_id):
        members = list(group)
        free = _free(members[0].pool, nodes)
        for service in members:
            changed += _scale(service, now, at, free)
            services.samples_prune(service, at - HISTORY)
    return changed


def _scale(service: Service, now: float, at: datetime, free: list[int]) -> bool:
    total, missing = _reading(service, now)
    policy = autoscale.Policy(service.min_replicas, service.max_replicas, service.target_per_replica)
    since = datetime.fromtimestamp(now - autoscale.WINDOW, UTC)
    recommendations = [(a.timestamp(), r) for a, r in ServiceSample.objects.filter(
        service=service, at__gt=since, recommendation__isnull=False).values_list("at", "recommendation")]
    ups = [autoscale.ScaleUp(a.timestamp(), b, c) for a, b, c in ScaleEvent.objects.filter(
        service=service, autoscaled=True, at__gt=datetime.fromtimestamp(now - autoscale.PERIOD, UTC)).values_list(
        "at", "before", "after")]
    decision = autoscale.decide(policy, service.replicas, total, now, recommendations=recommendations,
                                scale_ups=ups, missing=missing)
    ready = dispatch.ready(service)
    if ready is None:
        ready = (fit(free, service.devices_per_replica, decision.replicas)
                 if service.pool.cluster.backend == Cluster.Backend.SIMULATED else service.ready_replicas)
    return bool(services.scale_apply(service=service, decision=decision, ready=min(ready, decision.replicas), at=at))


def _reading(service: Service, now: float) -> tuple[float | None, str]:
    """The metric's total now (requests/s as read; a GPU duty cycle, the replicas' mean, times the ready replicas,
    as the HPA's utilisation rule counts it), or None and why."""
    if service.source == Service.Source.PROMETHEUS:
        value, why = _prometheus(service.query, now)
        if value is None:
            return None, why
        services.metric_set(service=service, value=value)
    elif service.metric_at is None or service.metric_value is None:
        return None, "no metric pushed yet"
    elif now - service.metric_at.timestamp() > STALE:
        return None, f"the last metric is {now - service.metric_at.timestamp():.0f} s old"
    value = float(service.metric_value)
    if service.metric == Service.Metric.GPU_DUTY_CYCLE:
        if service.ready_replicas == 0:
            return None, "no ready replica to measure the duty cycle of"
        return value * service.ready_replicas, ""
    return value, ""


def _prometheus(query: str, now: float) -> tuple[float | None, str]:
    """The sum over the query's series of their last value in the past minute."""
    tidal = settings.TIDAL
    if not tidal["PROMETHEUS_URL"]:
        return None, "Prometheus is not configured (TIDAL_PROMETHEUS_URL)"
    try:
        series = prometheus.query_range(tidal["PROMETHEUS_URL"], query, int(now) - 60, int(now), 15,
                                        token=tidal["PROMETHEUS_TOKEN"], timeout=5.0)
    except prometheus.PrometheusError as error:
        return None, str(error)[:300]
    values = [float(s["values"][-1][1]) for s in series if s.get("values")]
    if not values:
        return None, "the Prometheus query returned no series"
    return sum(values), ""


def _free(pool: Pool, nodes: tuple[core.Node, ...]) -> list[int]:
    """Devices of the pool's schedulable nodes training does not hold, the last node (in the scheduler's order)
    first."""
    members = pool_nodes(pool, nodes)
    held: defaultdict[str, int] = defaultdict(int)
    names = {split_node_key(n.name)[1] for n in members}
    for placement in Job.objects.filter(state__in=list(HOLDING), current_attempt__cluster_id=pool.cluster_id) \
            .values_list("current_attempt__placement", flat=True):
        for a in placement or []:
            if a["node"] in names:
                held[a["node"]] += int(a["devices"])
    return [max(0, n.devices - held[split_node_key(n.name)[1]]) if n.schedulable else 0
            for n in reversed(members)]


def fit(free: list[int], devices: int, replicas: int) -> int:
    """How many of `replicas` fit, one per node, in `free` (taken from it, first entries first)."""
    placed = 0
    for i, left in enumerate(free):
        while placed < replicas and left >= devices:
            left -= devices
            placed += 1
        free[i] = left
    return placed
