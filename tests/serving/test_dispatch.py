"""Services on Kubernetes through serving/dispatch.py and clusters/kube/serving.py, against kmock (a real HTTP API
server emulator): nothing is dispatched on a simulated cluster; on a Kubernetes cluster a service's Deployment and
Service are created on its pool's nodes, scaled when the autoscaler scales it, read for ready replicas and deleted
with it; an API server that refuses leaves the service recorded and the error logged."""

from __future__ import annotations

import time

import pytest

from clusters.models import Cluster
from serving import dispatch, scaler, services
from tests.clusters.conftest import _fresh_clients, kube  # noqa: F401  (fixtures: kmock, per-test clients)


@pytest.fixture
def on_kube(inventory, kube):  # noqa: F811
    """The pool's cluster is a Kubernetes cluster whose API server is kmock."""
    cluster = Cluster.objects.get(pk=inventory["cluster"].pk)
    cluster.backend = Cluster.Backend.KUBERNETES
    cluster.namespace_pattern = "tidal-{project}"
    cluster.set_kubeconfig(kube.kubeconfig())
    cluster.save()
    return kube


def test_nothing_is_dispatched_on_a_simulated_cluster(tenant, pool, kube, django_capture_on_commit_callbacks):  # noqa: F811
    from tests.serving.conftest import make_service

    with django_capture_on_commit_callbacks(execute=True):
        service = make_service(tenant)
    assert kube.objects("deployments") == {} and dispatch.ready(service) is None


def test_a_service_on_kubernetes_is_applied_scaled_read_and_deleted(tenant, pool, on_kube,
                                                                     django_capture_on_commit_callbacks):
    from tests.serving.conftest import make_service

    with django_capture_on_commit_callbacks(execute=True):
        service = make_service(tenant, env={"MODEL": "chat-7b"}, command=["serve"], port=9000)
    key = ("tidal-vision", f"tidal-svc-{service.pk}")
    deployment = on_kube.objects("deployments")[key]
    assert key in on_kube.objects("services")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["serve"] and {"name": "MODEL", "value": "chat-7b"} in container["env"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "4" and deployment["spec"]["replicas"] == 1
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert sorted(terms[0]["matchFields"][0]["values"]) == ["a-n1", "a-n2"]  # the pool's nodes only
    services.metric_set(service=service, value=20.0)  # 20 requests/s at 10 a replica: 2 replicas
    with django_capture_on_commit_callbacks(execute=True):
        scaler.tick(time.time())
    assert on_kube.objects("deployments")[key]["spec"]["replicas"] == 2
    on_kube.put("deployments", key[0], {**on_kube.objects("deployments")[key],
                                        "status": {"replicas": 2, "readyReplicas": 1}}, group="apps")
    service.refresh_from_db()
    assert dispatch.ready(service) == 1  # the Deployment's count, not the simulated fit
    with django_capture_on_commit_callbacks(execute=True):
        services.service_delete(actor=tenant.users["member"], service=service)
    assert key not in on_kube.objects("deployments") and key not in on_kube.objects("services")


def test_an_api_server_that_refuses_leaves_the_service_recorded_and_logs(tenant, pool, on_kube, clients, caplog,
                                                                         django_capture_on_commit_callbacks):
    from tests.serving.conftest import service_body

    on_kube.stop()  # nothing answers at the cluster's address
    with django_capture_on_commit_callbacks(execute=True):
        response = clients["member"].post("/api/v1/services/", service_body(), format="json")
    assert response.status_code == 201
    assert "in on_commit()" in caplog.text  # the failed apply, logged after the commit that recorded the service
    from serving.models import Service

    assert Service.objects.filter(pk=response.json()["id"]).exists()
