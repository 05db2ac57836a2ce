"""A service's p99 latency against its SLO, passed to the pools' interference rule (`pools.interference`: "latency
SLO missed while training runs on those nodes -> stop lending on them, move the training")."""

from __future__ import annotations

from jobs import ports
from pools import interference
from pools.source import pool_nodes
from serving.models import Service


def report(service_id: int) -> None:
    """Tell the pool's interference rule the service's last p99 latency and SLO, with the nodes its replicas may be
    on: the pool's nodes where services' replicas hold devices (node sync counts them on Kubernetes), or every node of
    the pool where that is not known (a simulated cluster counts replicas per pool)."""
    service = Service.objects.select_related("pool__cluster", "pool__flavor").filter(pk=service_id).first()
    if service is None or service.p99_latency_ms is None or service.latency_slo_ms is None:
        return
    members = pool_nodes(service.pool, ports.inventory().nodes)
    serving = [n.name for n in members if n.serving]
    interference.report_latency(service.pool, serving or [n.name for n in members], service.p99_latency_ms,
                                service.latency_slo_ms)
