"""With TIDAL_QUARANTINE_CORDON, a node reliability quarantines is cordoned on its Kubernetes cluster (kmock over real
HTTP) through the dispatch port, and uncordoned when staff release it; a node someone else cordoned is left so."""

from __future__ import annotations

import copy

import pytest

from clusters.kube import names
from clusters.models import Node
from reliability.services import node_quarantine, node_release
from tests.clusters.test_kubernetes_backend import seed_nodes


@pytest.fixture
def gpu1(kube_inventory, kube) -> Node:
    seed_nodes(kube)
    return Node.objects.get(cluster=kube_inventory["cluster"], name="gpu-1")


def on_cluster(kube, name: str = "gpu-1") -> dict:
    return kube.objects("nodes")[(None, name)]


def quarantine_then_release(node: Node, capture) -> tuple[bool, bool]:
    """Whether the inventory showed the node cordoned after its quarantine, and after its release."""
    with capture(execute=True):
        assert node_quarantine(node, reason="GPU fallen off the bus (Xid 79)", actor="tidal-reliability")
    quarantined = Node.objects.get(pk=node.pk).cordoned
    with capture(execute=True):
        node_release(Node.objects.get(pk=node.pk), actor="tidal-reliability")
    return quarantined, Node.objects.get(pk=node.pk).cordoned


def test_a_quarantined_node_is_cordoned_and_uncordoned_on_release(gpu1, kube, settings,
                                                                  django_capture_on_commit_callbacks) -> None:
    settings.TIDAL = {**settings.TIDAL, "QUARANTINE_CORDON": True}
    with django_capture_on_commit_callbacks(execute=True):
        node_quarantine(gpu1, reason="GPU fallen off the bus (Xid 79)", actor="tidal-reliability")
    node = on_cluster(kube)
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"][names.ANNOTATION_CORDON] == "true"
    assert Node.objects.get(pk=gpu1.pk).cordoned  # the inventory at once, not at the next node sync
    assert on_cluster(kube, "gpu-2").get("spec", {}).get("unschedulable") is None  # only that node

    with django_capture_on_commit_callbacks(execute=True):
        node_release(Node.objects.get(pk=gpu1.pk), actor="tidal-reliability")
    node = on_cluster(kube)
    assert node["spec"]["unschedulable"] is False
    assert names.ANNOTATION_CORDON not in (node["metadata"].get("annotations") or {})
    assert not Node.objects.get(pk=gpu1.pk).cordoned


def test_a_node_cordoned_by_someone_else_stays_cordoned_after_the_release(gpu1, kube, settings,
                                                                          django_capture_on_commit_callbacks) -> None:
    settings.TIDAL = {**settings.TIDAL, "QUARANTINE_CORDON": True}
    drained = copy.deepcopy(on_cluster(kube))
    drained["spec"] = {"unschedulable": True}  # an admin's `kubectl drain`
    kube.put("nodes", None, drained)
    assert quarantine_then_release(gpu1, django_capture_on_commit_callbacks) == (False, False)
    node = on_cluster(kube)
    assert node["spec"]["unschedulable"] is True
    assert names.ANNOTATION_CORDON not in (node["metadata"].get("annotations") or {})


def test_without_the_setting_nothing_is_cordoned(gpu1, kube, django_capture_on_commit_callbacks) -> None:
    assert quarantine_then_release(gpu1, django_capture_on_commit_callbacks) == (False, False)
    assert "unschedulable" not in on_cluster(kube).get("spec", {})
