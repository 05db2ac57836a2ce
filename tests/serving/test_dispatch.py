"""The adapter to clusters/kube/serving.py (serving/dispatch.py): nothing is dispatched without it or on a simulated
cluster; with it, a service on a Kubernetes cluster is applied, scaled and deleted by its key, and its ready replicas
are the Deployment's. The module is stood in for here by one with the same names (the lead tests the real one)."""

from __future__ import annotations

import sys
import time
import types
from dataclasses import dataclass
from typing import Any

import pytest

from clusters.models import Cluster
from serving import dispatch, scaler, services


@dataclass(frozen=True)
class ServiceSpec:
    key: str
    namespace: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: dict[str, str]
    port: int
    devices_per_replica: int
    device_resource: str
    node_names: tuple[str, ...]
    replicas: int
    labels: dict[str, str]
    cpu: str = "1"
    memory: str = "4Gi"
    settings: Any = None


@pytest.fixture
def kube_module(monkeypatch):
    calls: list[tuple] = []
    module = types.ModuleType("clusters.kube.serving")
    module.ServiceSpec = ServiceSpec
    module.apply = lambda client, spec: calls.append(("apply", spec))
    module.scale = lambda client, namespace, key, replicas: calls.append(("scale", namespace, key, replicas))
    module.delete = lambda client, namespace, key: calls.append(("delete", namespace, key))
    module.ready_replicas = lambda client, namespace, key: 1
    monkeypatch.setitem(sys.modules, "clusters.kube.serving", module)
    monkeypatch.setattr(dispatch, "_where", lambda cluster, project, organization: (object(), f"tidal-{project}"))
    return calls


def test_nothing_is_dispatched_on_a_simulated_cluster(tenant, pool, kube_module, django_capture_on_commit_callbacks):
    from tests.serving.conftest import make_service

    with django_capture_on_commit_callbacks(execute=True):
        make_service(tenant)
    assert kube_module == []


def test_a_service_on_kubernetes_is_applied_scaled_and_deleted_by_its_key(
        tenant, inventory, pool, kube_module, django_capture_on_commit_callbacks):
    from tests.serving.conftest import make_service

    Cluster.objects.filter(pk=inventory["cluster"].pk).update(backend=Cluster.Backend.KUBERNETES)
    with django_capture_on_commit_callbacks(execute=True):
        service = make_service(tenant, env={"MODEL": "chat-7b"}, command=["serve"], port=9000)
    (kind, spec), = kube_module
    assert kind == "apply" and spec.key == f"tidal-svc-{service.pk}" and spec.namespace == "tidal-vision"
    assert (spec.node_names, spec.devices_per_replica, spec.device_resource) == (("a-n1", "a-n2"), 4,
                                                                                 "nvidia.com/gpu")
    assert (spec.replicas, spec.port, spec.env, spec.command) == (1, 9000, {"MODEL": "chat-7b"}, ("serve",))
    services.metric_set(service=service, value=20.0)
    with django_capture_on_commit_callbacks(execute=True):
        scaler.tick(time.time())
    assert kube_module[-1] == ("scale", "tidal-vision", spec.key, 2)
    service.refresh_from_db()
    assert service.ready_replicas == 1  # the Deployment's, not the simulated fit
    with django_capture_on_commit_callbacks(execute=True):
        services.service_delete(actor=tenant.users["member"], service=service)
    assert kube_module[-1] == ("delete", "tidal-vision", spec.key)


def test_without_the_module_nothing_is_dispatched_and_ready_is_kept(tenant, inventory, pool, monkeypatch):
    from tests.serving.conftest import make_service

    monkeypatch.setitem(sys.modules, "clusters.kube.serving", None)  # an import of it fails
    Cluster.objects.filter(pk=inventory["cluster"].pk).update(backend=Cluster.Backend.KUBERNETES)
    service = make_service(tenant)
    assert dispatch.kube() is None and dispatch.ready(service) is None
    scaler.tick(time.time())
    service.refresh_from_db()
    assert service.ready_replicas == 0




def test_a_kubernetes_error_after_commit_is_logged_and_the_service_stays(
        tenant, inventory, pool, kube_module, clients, caplog, django_capture_on_commit_callbacks):
    from tests.serving.conftest import service_body

    def refuse(client, spec):
        raise RuntimeError("the API server is unreachable")

    sys.modules["clusters.kube.serving"].apply = refuse
    Cluster.objects.filter(pk=inventory["cluster"].pk).update(backend=Cluster.Backend.KUBERNETES)
    with django_capture_on_commit_callbacks(execute=True):
        response = clients["member"].post("/api/v1/services/", service_body(), format="json")
    assert response.status_code == 201
    assert "the API server is unreachable" in caplog.text
