"""A service on Kubernetes: one Deployment and one Service, through `clusters/kube/serving.py` (ServiceSpec,
apply, scale, delete, ready_replicas). This is the one place serving talks to it.

Services on simulated clusters dispatch nothing (scaler.py gives their replicas the pool's free devices).
"""

from __future__ import annotations

from clusters.kube import serving as kube
from clusters.kube.client import KubeClient
from clusters.models import Cluster
from jobs import ports
from jobs.scheduling.model import split_node_key
from pools.source import pool_nodes
from serving.models import Service


def key(service_id: int) -> str:
    """The Deployment's and the Service's name: stable, so a retried apply meets its own objects."""
    return f"tidal-svc-{service_id}"


def _on_kubernetes(service: Service) -> bool:
    return bool(service.pool.cluster.backend == Cluster.Backend.KUBERNETES)


def _where(cluster: Cluster, project_slug: str, organization_slug: str) -> tuple[KubeClient, str]:
    from clusters.backends.kubernetes import clients, mapping

    return clients.client_for(cluster), mapping.namespace_for(cluster, project_slug, organization_slug)


def spec(service: Service) -> kube.ServiceSpec:
    """The ServiceSpec of `service` (clusters/kube/serving.py), on its pool's nodes."""
    from clusters.backends.kubernetes import mapping

    cluster = service.pool.cluster
    namespace = mapping.namespace_for(cluster, service.project.slug, service.project.organization.slug)
    nodes = tuple(split_node_key(n.name)[1] for n in pool_nodes(service.pool, ports.inventory().nodes))
    return kube.ServiceSpec(
        key=key(service.pk), namespace=namespace, image=service.image, command=tuple(service.command),
        args=tuple(service.args), env={str(k): str(v) for k, v in service.env.items()}, port=service.port,
        devices_per_replica=service.devices_per_replica, device_resource=service.pool.flavor.device_resource,
        node_names=nodes, replicas=service.replicas,
        labels={"tidal.dev/project": service.project.slug, "tidal.dev/service-id": str(service.pk)},
        settings=mapping.cluster_settings(cluster, namespace))


def _load(service_id: int) -> Service | None:
    service: Service | None = (Service.objects.select_related("pool__cluster", "pool__flavor", "project__organization")
                               .filter(pk=service_id).first())
    return service


def apply(service_id: int) -> None:
    """Create or update the service's objects (after its creation committed)."""
    service = _load(service_id)
    if service is None or not _on_kubernetes(service):
        return
    client, _ = _where(service.pool.cluster, service.project.slug, service.project.organization.slug)
    kube.apply(client, spec(service))


def scale(service_id: int) -> None:
    """Set the Deployment's replicas to the service's desired replicas (after a scale event committed)."""
    service = _load(service_id)
    if service is None or not _on_kubernetes(service):
        return
    client, namespace = _where(service.pool.cluster, service.project.slug, service.project.organization.slug)
    kube.scale(client, namespace, key(service.pk), service.replicas)


def delete(service_id: int, *, project_id: int) -> None:
    """Delete a deleted service's objects from every Kubernetes cluster its project's namespace may be on."""
    from tenancy.models import Project

    project = Project.objects.select_related("organization").filter(pk=project_id).first()
    if project is None:
        return
    for cluster in Cluster.objects.filter(backend=Cluster.Backend.KUBERNETES):
        client, namespace = _where(cluster, project.slug, project.organization.slug)
        kube.delete(client, namespace, key(service_id))


def ready(service: Service) -> int | None:
    """Ready replicas as Kubernetes counts them; None when the service is not on Kubernetes."""
    if not _on_kubernetes(service):
        return None
    client, namespace = _where(service.pool.cluster, service.project.slug, service.project.organization.slug)
    return int(kube.ready_replicas(client, namespace, key(service.pk)))
