"""A Kubernetes cluster record pointing at kmock (real HTTP), with flavors, quotas and two GPU nodes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from clusters.kube.client import KubeClient
from clusters.kube.ratelimit import Backoff
from clusters.models import Cluster, FlavorRule, Node
from quotas.models import Quota, ResourceFlavor
from tests.clusters.kube.conftest import KMockThread
from tests.jobs.conftest import inventory  # noqa: F401  (the simulated cluster, for comparisons)


@pytest.fixture()
def kube() -> Iterator[KMockThread]:
    server = KMockThread().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def sleeps() -> list[float]:
    return []


@pytest.fixture()
def kube_client(kube, sleeps) -> Iterator[KubeClient]:
    """A client for tests that need short, recorded backoff (still real HTTP, never a mock object)."""
    client = KubeClient.from_kubeconfig(kube.kubeconfig(), qps=1000.0, burst=1000,
                                        backoff=Backoff(base=0.1, cap=2.0, max_retries=2, rand=lambda: 0.5),
                                        sleep=sleeps.append)
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _fresh_clients():
    from clusters.backends.kubernetes.clients import forget_clients

    forget_clients()
    yield
    forget_clients()


@pytest.fixture()
def kube_inventory(tenant, kube, settings) -> dict[str, Any]:
    """Cluster `gpu` (kubernetes, kubeconfig -> kmock): nodes gpu-1 (rack r1) and gpu-2 (rack r2), 8 h100 each."""
    settings.TIDAL = {**settings.TIDAL, "KUBE_INSTANCE": "ci"}
    h100 = ResourceFlavor.objects.create(name="nvidia-h100-80gb", vendor="nvidia", device_resource="nvidia.com/gpu",
                                         rdma=True)
    cluster = Cluster(name="gpu", backend=Cluster.Backend.KUBERNETES, qps=1000, burst=1000,
                      namespace_pattern="tidal-{project}", image_pull_secret="regcred", nccl_socket_ifname="ib0",
                      nccl_extra_env={"NCCL_DEBUG": "INFO"}, termination_grace_seconds=45)
    cluster.set_kubeconfig(kube.kubeconfig())
    cluster.save()
    FlavorRule.objects.create(pattern="nvidia-h100*", flavor=h100)
    for position, (name, rack) in enumerate((("gpu-1", "r1"), ("gpu-2", "r2")), start=1):
        Node.objects.create(cluster=cluster, name=name, hostname=f"{name}.internal", flavor=h100, devices=8,
                            rack=rack, block="b1", position=position)
    Quota.objects.create(project=tenant.project, flavor=h100, guaranteed=16, borrow_limit=0)
    return {"cluster": cluster, "h100": h100}


@pytest.fixture
def cycle(django_capture_on_commit_callbacks):
    """One scheduler cycle with its after-commit work (dispatch, stop) run, as in production."""
    from jobs.loop import run_once

    def run():
        with django_capture_on_commit_callbacks(execute=True):
            return run_once()

    return run


@pytest.fixture
def resync(kube_inventory, django_capture_on_commit_callbacks):
    """One full resync of the Kubernetes cluster (observe every open attempt, record what follows), with its
    after-commit work (stops) run, as in production."""
    from clusters.backends import observe_cluster

    def run(cluster=None):
        with django_capture_on_commit_callbacks(execute=True):
            return observe_cluster(cluster or kube_inventory["cluster"])

    return run
