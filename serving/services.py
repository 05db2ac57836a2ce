"""Writes for services: create, change, delete (a project's members), the metric pushed to the API, and what the
autoscaler decides (scaler.py). Every write that changes the devices a service demands of its pool wakes the
scheduler once it committed: the pool lends less (or more) to training."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import wakeup
from core.errors import DomainError
from jobs import ports
from pools.models import Pool
from pools.source import pool_nodes
from quotas.models import Quota
from serving import dispatch, interference
from serving.autoscale import Decision
from serving.models import MAX_REPLICAS, ScaleEvent, Service, ServiceSample
from tenancy.audit import delete_audited, save_audited
from tenancy.models import Project

FIELDS = ("name", "pool", "image", "command", "args", "env", "port", "devices_per_replica", "min_replicas",
          "max_replicas", "metric", "target_per_replica", "source", "query", "latency_slo_ms")
CHANGEABLE = ("min_replicas", "max_replicas", "target_per_replica", "latency_slo_ms", "query")
MAX_METRIC = 1e12


def _pool_devices(pool: Pool) -> tuple[int, int]:
    """The pool's devices and its largest node's (a replica runs on one node)."""
    members = pool_nodes(pool, ports.inventory().nodes)
    sizes = [n.devices + n.foreign for n in members]
    return sum(sizes), max(sizes, default=0)


def _check(service: Service) -> None:
    """The rules a service keeps, each broken one a 400 naming its field."""
    pool = service.pool
    if not Quota.objects.filter(project_id=service.project_id, flavor_id=pool.flavor_id).exists():
        raise DomainError(f"Project {service.project.slug} has no quota of {pool.flavor.name}, the flavor of pool "
                          f"{pool.name}: it may not run services there.", field="pool")
    if service.min_replicas > service.max_replicas:
        raise DomainError(f"The minimum ({service.min_replicas}) is above the maximum ({service.max_replicas}).",
                          field="replicas.min")
    if not 1 <= service.max_replicas <= MAX_REPLICAS:
        raise DomainError(f"From 1 to {MAX_REPLICAS}.", field="replicas.max")
    capacity, largest = _pool_devices(pool)
    if service.devices_per_replica > largest:
        raise DomainError(f"{service.devices_per_replica} devices do not fit on one node of pool {pool.name} (the "
                          f"largest has {largest}).", field="devices_per_replica")
    if service.max_replicas * service.devices_per_replica > capacity:
        raise DomainError(f"{service.max_replicas} replicas of {service.devices_per_replica} devices are more than "
                          f"pool {pool.name}'s {capacity}.", field="replicas.max")
    if not 0 < service.target_per_replica <= MAX_METRIC:
        raise DomainError("A number above 0: the metric one replica should carry.", field="target_per_replica")
    if service.source == Service.Source.PROMETHEUS:
        if not service.query.strip():
            raise DomainError("A PromQL query giving the metric (source prometheus).", field="query")
        if not settings.TIDAL["PROMETHEUS_URL"]:
            raise DomainError("Prometheus is not configured here (TIDAL_PROMETHEUS_URL): push the metric instead.",
                              field="source")


@transaction.atomic
def service_create(*, actor: Any, project: Project, values: dict[str, Any]) -> Service:
    """A new service at its minimum replicas (the autoscaler takes it from there). `values["pool"]`: a Pool or
    its name."""
    values = dict(values)
    if not isinstance(values.get("pool"), Pool):
        pool = Pool.objects.select_related("cluster", "flavor").filter(name=values.get("pool")).first()
        if pool is None:
            raise DomainError(f"No pool named {values.get('pool')!r}.", field="pool")
        values["pool"] = pool
    service = Service(project=project, created_by=actor if getattr(actor, "is_authenticated", False) else None,
                      **values)
    if Service.objects.filter(project=project, name=service.name).exists():
        raise DomainError(f"Project {project.slug} already has a service named {service.name}.", field="name")
    _check(service)
    service.replicas = service.min_replicas
    save_audited(actor=actor, obj=service, fields=FIELDS, project=project)
    ScaleEvent.objects.create(service=service, at=timezone.now(), before=0, after=service.replicas,
                              reason=f"created at its minimum of {service.min_replicas}", autoscaled=False)
    transaction.on_commit(lambda: dispatch.apply(service.pk), robust=True)  # a Kubernetes error is logged
    transaction.on_commit(wakeup.wake_scheduler)
    return service


@transaction.atomic
def service_update(*, actor: Any, service: Service, values: dict[str, Any]) -> Service:
    """Change the replicas' bounds, the target, the SLO or the query; the autoscaler applies them at its next tick
    (a raised minimum and a lowered maximum at once, autoscale.py)."""
    service = Service.objects.select_for_update().select_related("pool__flavor", "project").get(pk=service.pk)
    for name, value in values.items():
        if name not in CHANGEABLE:
            raise DomainError("A service's image, pool and shape are fixed: delete it and create it again.",
                              field=name)
        setattr(service, name, value)
    _check(service)
    save_audited(actor=actor, obj=service, fields=CHANGEABLE, project=service.project)
    return service


@transaction.atomic
def service_delete(*, actor: Any, service: Service) -> None:
    pk, project = service.pk, service.project
    delete_audited(actor=actor, obj=service, fields=("name", "pool", "replicas"), project=project)
    transaction.on_commit(lambda: dispatch.delete(pk, project_id=project.pk), robust=True)
    transaction.on_commit(wakeup.wake_scheduler)


@transaction.atomic
def metric_set(*, service: Service, value: float, p99_latency_ms: float | None = None) -> Service:
    """The metric now (requests/s: the service's total; GPU duty cycle: its replicas' mean percent), pushed by the
    service or its gateway; the autoscaler reads the last one. A p99 latency against the service's SLO goes to the
    pool's interference rule where there is one (interference.py)."""
    Service.objects.filter(pk=service.pk).update(metric_value=value, metric_at=timezone.now(),
                                                 p99_latency_ms=p99_latency_ms)
    service.refresh_from_db(fields=["metric_value", "metric_at", "p99_latency_ms"])
    if p99_latency_ms is not None and service.latency_slo_ms is not None:
        transaction.on_commit(lambda: interference.report(service.pk), robust=True)
    return service


@transaction.atomic
def scale_apply(*, service: Service, decision: Decision, ready: int, at: datetime) -> bool:
    """Record one autoscaler tick (a sample: the 300 s window reads its recommendation) and, when the desired
    replicas change, the scale event with its reason. Whether the desired replicas changed."""
    before = service.replicas
    ServiceSample.objects.create(service=service, at=at, value=service.metric_value,
                                 recommendation=decision.recommendation, replicas=decision.replicas, ready=ready)
    reason = decision.reason[:500]
    Service.objects.filter(pk=service.pk).update(replicas=decision.replicas, ready_replicas=ready, scale_reason=reason)
    service.replicas, service.ready_replicas, service.scale_reason = decision.replicas, ready, reason
    if decision.replicas == before:
        return False
    ScaleEvent.objects.create(service=service, at=at, before=before, after=decision.replicas,
                              reason=reason)
    transaction.on_commit(lambda: dispatch.scale(service.pk), robust=True)
    transaction.on_commit(wakeup.wake_scheduler)
    return True


def samples_prune(service: Service, before: datetime) -> int:
    """Forget the service's samples older than its page shows (24 h); by service, so the index serves it."""
    deleted: int = ServiceSample.objects.filter(service=service, at__lt=before).delete()[0]
    return deleted

