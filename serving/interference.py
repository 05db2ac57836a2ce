"""A service's p99 latency against its SLO, passed to the pools' interference rule (`pools/interference.py`:
"latency SLO missed while training runs on those nodes -> stop lending on them, move the training"), where that
module is installed; without it a latency report is kept on the service and nothing else happens."""

from __future__ import annotations

import importlib

from jobs import ports
from pools.source import pool_nodes
from serving.models import Service


def report(service_id: int) -> None:
    """Tell the pool's interference rule the service's last p99 latency and SLO, with the nodes its replicas may run
    on (the pool's: a replica's node is Kubernetes' choice)."""
    try:
        interference = importlib.import_module("pools.interference")
    except ImportError:  # not installed: no rule to tell
        return
    service = Service.objects.select_related("pool__cluster", "pool__flavor").filter(pk=service_id).first()
    if service is None or service.p99_latency_ms is None or service.latency_slo_ms is None:
        return
    nodes = [n.name for n in pool_nodes(service.pool, ports.inventory().nodes)]
    interference.report_latency(service.pool, nodes, service.p99_latency_ms, service.latency_slo_ms)
