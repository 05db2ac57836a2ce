"""RBAC: the emulator's authorizer, the documented RBAC (docs/kubernetes.md) against ``REQUIRED_PERMISSIONS``, the
connection test's ``missing_permissions`` and the orphan sweep, over real HTTP against kmock enforcing the rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from clusters.kube.client import CORDON_PERMISSIONS, REQUIRED_PERMISSIONS, KubeClient, Permission
from clusters.kube.dispatch import attempt_key, dispatch, sweep_orphans
from clusters.kube.errors import PermanentError
from clusters.kube.render import render
from clusters.kube.spec import ClusterSettings, Placement, RenderJob, ReplicaGroup, ReplicaPlacement
from tests.clusters.kube.apiserver import Attributes, Policy, documented_rbac, request_attributes

BOUND, UNBOUND = "tidal-nlp", "tidal-other"


def permission_of(attributes: Attributes) -> Permission:
    return Permission(attributes.verb, attributes.resource, attributes.subresource, bool(attributes.namespace),
                      attributes.group)


def granted(documents: list[dict[str, Any]]) -> set[Permission]:
    """Every (verb, resource) the manifests grant, in the scope of its binding: a ClusterRole bound by a
    ClusterRoleBinding is cluster-wide, bound by a RoleBinding it is namespaced."""
    roles = {d["metadata"]["name"]: d for d in documents if d["kind"] == "ClusterRole"}
    out = set()
    for binding in documents:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        for rule in roles[binding["roleRef"]["name"]]["rules"]:
            assert rule["apiGroups"] in ([""], ["apps"]), rule  # the core group, and apps for deployments
            for resource in rule["resources"]:
                name, _, sub = resource.partition("/")
                out |= {Permission(verb, name, sub, binding["kind"] == "RoleBinding", rule["apiGroups"][0])
                        for verb in rule["verbs"]}
    return out


def without(documents: list[dict[str, Any]], verb: str, resource: str) -> list[dict[str, Any]]:
    """The manifests with ``verb`` on ``resource`` taken out of every role, whatever its scope."""
    out = copy.deepcopy(documents)
    for doc in out:
        if doc["kind"] != "ClusterRole":
            continue
        rules = []
        for rule in doc["rules"]:
            for res in rule["resources"]:
                verbs = [v for v in rule["verbs"] if not (res == resource and v == verb)]
                if verbs:
                    rules.append({**rule, "resources": [res], "verbs": verbs})
        doc["rules"] = rules
    return out


def resource_name(permission: Permission) -> str:
    return f"{permission.resource}/{permission.subresource}" if permission.subresource else permission.resource


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces/ns/pods", {}, Attributes("list", "pods", "", "ns")),
    ("GET", "/api/v1/pods", {"watch": "true"}, Attributes("watch", "pods")),
    ("GET", "/api/v1/namespaces/ns/pods/p/log", {}, Attributes("get", "pods", "log", "ns")),
    ("POST", "/api/v1/namespaces/ns/configmaps", {}, Attributes("create", "configmaps", "", "ns")),
    ("DELETE", "/api/v1/namespaces/ns/secrets/s", {}, Attributes("delete", "secrets", "", "ns")),
    ("DELETE", "/api/v1/namespaces/ns/secrets", {}, Attributes("deletecollection", "secrets", "", "ns")),
    ("GET", "/api/v1/nodes", {}, Attributes("list", "nodes")),
    ("PATCH", "/api/v1/nodes/n", {}, Attributes("patch", "nodes")),
    ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", {},
     Attributes("patch", "deployments", "scale", "ns", "apps")),
    ("GET", "/api/v1/events", {}, Attributes("list", "events")),
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {},
     Attributes("create", "selfsubjectaccessreviews", group="authorization.k8s.io")),
    ("GET", "/version", {}, None), ("GET", "/api/v1", {}, None), ("GET", "/apis/batch/v1", {}, None),
])
def test_requests_map_to_the_attributes_rbac_decides_on(method, path, query, expected) -> None:
    assert request_attributes(method, path, query) == expected


def test_the_documented_rbac_grants_exactly_the_required_permissions() -> None:
    """Least privilege both ways: nothing the backend needs is missing, nothing it does not use is granted (the
    cordon of quarantined nodes, used only when the setting turns it on, included)."""
    assert granted(documented_rbac([BOUND])) == set(REQUIRED_PERMISSIONS) | set(CORDON_PERMISSIONS)


def test_the_policy_scopes_rules_by_their_binding() -> None:
    policy = Policy(documented_rbac([BOUND]))
    assert policy.allows(Attributes("delete", "pods", "", BOUND))
    assert not policy.allows(Attributes("delete", "pods", "", UNBOUND))  # no RoleBinding there
    assert not policy.allows(Attributes("list", "configmaps"))  # namespaced grants never reach the cluster scope
    assert policy.allows(Attributes("list", "pods")) and policy.allows(Attributes("list", "pods", "", UNBOUND))
    assert not policy.allows(Attributes("get", "pods", "exec", BOUND))  # "pods" does not cover its subresources
    assert not Policy([]).allows(Attributes("get", "pods", "", BOUND))


def test_documented_rbac_lacks_nothing(client: KubeClient, kube) -> None:
    kube.gate.policy = Policy(documented_rbac([BOUND]))
    assert client.missing_permissions(BOUND, CORDON_PERMISSIONS) == []
    assert kube.gate.denied == []


def test_without_its_rolebinding_a_namespace_lacks_every_namespaced_right(client: KubeClient, kube) -> None:
    kube.gate.policy = Policy(documented_rbac([BOUND]))
    expected = [p.describe(UNBOUND) for p in REQUIRED_PERMISSIONS if p.namespaced]
    # list pods and events are also granted cluster-wide, which covers every namespace
    assert client.missing_permissions(UNBOUND) == [e for e in expected if e not in (f"list pods in {UNBOUND}",
                                                                                  f"list events in {UNBOUND}")]


@pytest.mark.parametrize("permission", REQUIRED_PERMISSIONS, ids=lambda p: p.describe("ns"))
def test_the_connection_test_names_any_right_taken_away(client: KubeClient, kube, permission: Permission) -> None:
    """Take one verb on one resource out of the documented RBAC: missing_permissions names it, in every scope where
    the backend needs it, and nothing else."""
    kube.gate.policy = Policy(without(documented_rbac([BOUND]), permission.verb, resource_name(permission)))
    expected = [p.describe(BOUND) for p in REQUIRED_PERMISSIONS
                if (p.verb, resource_name(p)) == (permission.verb, resource_name(permission))]
    assert permission.describe(BOUND) in expected
    assert client.missing_permissions(BOUND) == expected


def orphan_attempt(namespace: str, job_id: int) -> list[dict[str, Any]]:
    """An attempt of a job that is no longer active: parent, Service, token Secret and two pods."""
    job = RenderJob(job_id=job_id, name="ghost", project="nlp", namespace=namespace, attempt=1, launcher="command",
                    image="x:1", command=("true",), replica_groups=(ReplicaGroup("worker", 2, 0),),
                    secret_env={"TIDAL_RUN_TOKEN": "t"})
    placement = Placement(tuple(ReplicaPlacement("worker", i, f"n{i}") for i in range(2)))
    return render(job, placement, ClusterSettings(namespace=namespace, instance="ci"))


def test_the_sweep_needs_no_cluster_wide_list_and_skips_a_namespace_that_refuses(client: KubeClient, kube) -> None:
    for namespace, job_id in ((BOUND, 1), (UNBOUND, 2)):
        dispatch(client, orphan_attempt(namespace, job_id), workers=1)
    kube.gate.policy = Policy(documented_rbac([BOUND]))
    result = sweep_orphans(client, {attempt_key(9, 1)}, namespaces=[UNBOUND, BOUND], instance="ci")
    assert sorted(result.deleted) == sorted(f"{m['kind']}/{BOUND}/{m['metadata']['name']}"
                                            for m in orphan_attempt(BOUND, 1))
    assert list(result.skipped) == [UNBOUND] and "forbidden" in result.skipped[UNBOUND]
    assert all(a.namespace for a in kube.gate.authorized)  # every request was namespaced
    with pytest.raises(PermanentError) as info:  # what the sweep did before: list across namespaces
        client.list("ConfigMap", None, label_selector="tidal.dev/managed=true")
    assert info.value.status == 403
