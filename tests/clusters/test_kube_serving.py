"""A service's Deployment and Service (clusters/kube/serving.py, issue 30): manifests valid against the official
schemas (kubernetes-validate, strict) and the `restricted` Pod Security Standard; against kmock (a real HTTP API
server emulator) apply creates, re-applies without writing, updates what changed, scales through the scale
subresource, reads readiness, deletes idempotently and surfaces API errors as the kube layer's errors; node sync, the
reconciler's grouping and the orphan sweep take the service's pods and objects for Tidal's, never a training
attempt's or a foreign pod."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import kubernetes_validate
import pytest

from clusters.backends.kubernetes import nodesync
from clusters.backends.kubernetes.backend import group_pods
from clusters.kube import names, serving
from clusters.kube.client import KubeClient
from clusters.kube.dispatch import find_orphans
from clusters.kube.errors import PermanentError, RenderError, ReservedEnvError, TransientError
from clusters.kube.nodes import foreign_usage
from clusters.kube.spec import ClusterSettings, Toleration
from clusters.models import Node
from tests.clusters.kube.apiserver import Outage, Policy, documented_rbac
from tests.clusters.kube.pss import violations
from tests.clusters.kube.test_kube_render import K8S_VERSION
from tests.clusters.test_node_sync import node

NS = "tidal-nlp"
KEY = "tidal-svc-42"
SETTINGS = ClusterSettings(namespace=NS, instance="ci", termination_grace_seconds=45, image_pull_secret="regcred",
                           gpu_tolerations=(Toleration(key="nvidia.com/gpu"), Toleration(key="pool", value="chat",
                                                                                          operator="Equal")))


def make_spec(**changes: Any) -> serving.ServiceSpec:
    spec = serving.ServiceSpec(
        key=KEY, namespace=NS, image="registry.example.com/vllm:0.6", command=("python", "-m", "vllm.serve"),
        args=("--port", "8000"), env={"MODEL": "llama-3-8b", "HF_HOME": "/cache"}, port=8000, devices_per_replica=2,
        device_resource="nvidia.com/gpu", node_names=("gpu-2", "gpu-1"), replicas=2,
        labels={names.LABEL_PROJECT: "nlp", "tidal.dev/service-id": "42"}, settings=SETTINGS)
    return replace(spec, **changes)


def deployment_of(kube) -> dict[str, Any]:
    return kube.objects("deployments")[(NS, KEY)]


def service_of(kube) -> dict[str, Any]:
    return kube.objects("services")[(NS, KEY)]


def container_of(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]["containers"][0]


def writes(kube) -> list[tuple[str, str]]:
    """Every request that reached the emulator and was not a read, as (method, path)."""
    return [(r.method, r.url.path) for r in kube.handler if r.method != "GET"]


def as_pod(deployment: dict[str, Any], node_name: str) -> dict[str, Any]:
    """A pod as the Deployment's ReplicaSet creates it from the template, running on ``node_name``."""
    template = copy.deepcopy(deployment["spec"]["template"])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {**template["metadata"], "name": f"{KEY}-7d9f-abcde", "namespace": NS},
            "spec": {**template["spec"], "nodeName": node_name}, "status": {"phase": "Running"}}


# ------------------------------------------------------------------------------------------------------ manifests

def test_manifests_are_a_valid_deployment_and_clusterip_service() -> None:
    deployment, service = serving.manifests(make_spec())
    for manifest in (deployment, service):
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
    assert (deployment["kind"], service["kind"]) == ("Deployment", "Service")
    assert deployment["metadata"]["name"] == service["metadata"]["name"] == KEY
    selector = deployment["spec"]["selector"]["matchLabels"]
    template = deployment["spec"]["template"]
    assert service["spec"]["selector"] == selector
    assert selector.items() <= template["metadata"]["labels"].items()
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "serve", "port": 8000, "targetPort": "serve", "protocol": "TCP"}]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}


def test_the_pods_get_what_training_pods_get() -> None:
    deployment, _ = serving.manifests(make_spec())
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels[names.LABEL_MANAGED] == "true" and labels[names.LABEL_INSTANCE] == "ci"
    assert labels[names.LABEL_SERVICE] == KEY and labels[names.LABEL_COMPONENT] == "service"
    assert labels[names.LABEL_PROJECT] == "nlp" and labels["tidal.dev/service-id"] == "42"
    assert names.LABEL_JOB not in labels and names.LABEL_ATTEMPT not in labels
    pod = deployment["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 45
    assert pod["tolerations"] == [t.to_dict() for t in SETTINGS.gpu_tolerations]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1", "gpu-2"]}]}]
    container = container_of(deployment)
    resources = container["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == "2"
    assert container["readinessProbe"]["tcpSocket"] == {"port": "serve"}
    assert container["ports"] == [{"name": "serve", "containerPort": 8000, "protocol": "TCP"}]
    assert container["command"] == ["python", "-m", "vllm.serve"] and container["args"] == ["--port", "8000"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["MODEL"] == "llama-3-8b" and env["TIDAL_SERVICE"] == KEY and "TIDAL_POD_NAME" in env
    pod_manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod}
    assert violations(pod_manifest, "baseline") == []
    # restricted, but for running as non-root: the image's user is unknown (as for a training job without its uid)
    assert [v.split(":")[0] for v in violations(pod_manifest, "restricted")] == ["Running as Non-root"]
    as_user = serving.manifests(make_spec(run_as_user=1000))[0]["spec"]["template"]["spec"]
    assert violations({**pod_manifest, "spec": as_user}, "restricted") == []


def test_the_same_spec_in_another_order_is_the_same_manifest() -> None:
    first = serving.manifests(make_spec())
    again = serving.manifests(make_spec(env={"HF_HOME": "/cache", "MODEL": "llama-3-8b"},
                                        node_names=("gpu-1", "gpu-2", "gpu-1")))
    assert first == again


@pytest.mark.parametrize(("changes", "field"), [
    ({"devices_per_replica": 0}, "devices_per_replica"),
    ({"port": 0}, "port"),
    ({"port": 65536}, "port"),
    ({"port": True}, "port"),
    ({"node_names": ()}, "node_names"),
    ({"node_names": ("Not A Node",)}, "node_names"),
    ({"replicas": -1}, "replicas"),
    ({"run_as_user": 0}, "run_as_user"),
    ({"key": "42-svc"}, "key"),  # a Service's name starts with a letter
    ({"key": "Svc"}, "key"),
    ({"namespace": "Tidal_NLP"}, "namespace"),
    ({"image": "not an image"}, "image"),
    ({"device_resource": ""}, "device_resource"),
    ({"memory": "lots"}, "memory"),
    ({"env": {"1BAD": "x"}}, "env"),
    ({"labels": {"bad key!": "x"}}, "labels"),
    ({"labels": {names.LABEL_JOB: "7"}}, "labels"),  # would pass for a training attempt's pod
])
def test_a_bad_spec_is_a_value_error_naming_the_field(changes, field) -> None:
    with pytest.raises(ValueError, match=field.split("_")[0]) as info:
        serving.manifests(make_spec(**changes))
    assert isinstance(info.value, RenderError) and info.value.field == field


def test_a_reserved_env_name_is_refused() -> None:
    with pytest.raises(ReservedEnvError):
        serving.manifests(make_spec(env={"TIDAL_POD_NAME": "x"}))


# ------------------------------------------------------------------------------------------------- against kmock

def test_apply_creates_both_objects_and_again_writes_nothing(kube_client: KubeClient, kube) -> None:
    serving.apply(kube_client, make_spec())
    deployment, service = deployment_of(kube), service_of(kube)
    assert container_of(deployment)["image"] == "registry.example.com/vllm:0.6"
    assert service["spec"]["ports"][0]["port"] == 8000
    created = writes(kube)
    assert sorted(created) == [("POST", f"/api/v1/namespaces/{NS}/services"),
                               ("POST", f"/apis/apps/v1/namespaces/{NS}/deployments")]
    calls = kube_client.calls
    serving.apply(kube_client, make_spec())  # a redelivered task
    assert writes(kube) == created and kube_client.calls - calls == 2  # two reads, no write
    assert deployment_of(kube) == deployment and service_of(kube) == service


def test_apply_with_a_new_image_and_env_patches_the_deployment_only(kube_client: KubeClient, kube) -> None:
    serving.apply(kube_client, make_spec())
    service = service_of(kube)
    before = len(writes(kube))
    serving.apply(kube_client, make_spec(image="registry.example.com/vllm:0.7", env={"MODEL": "llama-3-70b"}))
    assert writes(kube)[before:] == [("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/{KEY}")]
    container = container_of(deployment_of(kube))
    assert container["image"] == "registry.example.com/vllm:0.7"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["MODEL"] == "llama-3-70b" and "HF_HOME" not in env  # the list is replaced: a removed var is gone
    assert service_of(kube) == service


def test_apply_removes_what_the_spec_no_longer_has(kube_client: KubeClient, kube) -> None:
    serving.apply(kube_client, make_spec(labels={names.LABEL_PROJECT: "nlp", "team": "chat"}, run_as_user=1000))
    serving.apply(kube_client, make_spec(labels={names.LABEL_PROJECT: "nlp"}, port=9000))
    deployment, service = deployment_of(kube), service_of(kube)
    assert deployment["spec"]["template"]["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    for labels in (deployment["metadata"]["labels"], deployment["spec"]["template"]["metadata"]["labels"],
                   service["metadata"]["labels"]):
        assert "team" not in labels and labels[names.LABEL_PROJECT] == "nlp"
    assert service["spec"]["ports"][0]["port"] == 9000


def test_apply_over_an_object_another_delivery_created_meanwhile_converges(kube_client: KubeClient, kube) -> None:
    """The GET saw nothing, the create met the object (409): what is there is compared and brought to the spec."""
    old = serving.manifests(make_spec(image="registry.example.com/vllm:0.5"))[0]
    kube.handler[f"get /apis/apps/v1/namespaces/{NS}/deployments/{KEY}"][:1] << 404 << {
        "kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"}
    kube.put("deployments", NS, old, group="apps")
    serving.apply(kube_client, make_spec())
    assert container_of(deployment_of(kube))["image"] == "registry.example.com/vllm:0.6"
    deployments = f"/apis/apps/v1/namespaces/{NS}/deployments"
    assert [w for w in writes(kube) if w[1].startswith(deployments)] == [("POST", deployments),
                                                                          ("PATCH", f"{deployments}/{KEY}")]


def test_scale_goes_through_the_scale_subresource(kube_client: KubeClient, kube) -> None:
    serving.apply(kube_client, make_spec())
    before = len(writes(kube))
    serving.scale(kube_client, NS, KEY, 5)
    assert writes(kube)[before:] == [("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/{KEY}/scale")]
    assert deployment_of(kube)["spec"]["replicas"] == 5
    # apply with only another count scales too, without patching the template
    serving.apply(kube_client, make_spec(replicas=3))
    assert writes(kube)[before + 1:] == [("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/{KEY}/scale")]
    assert deployment_of(kube)["spec"]["replicas"] == 3
    with pytest.raises(ValueError, match="replicas"):
        serving.scale(kube_client, NS, KEY, -1)


def test_scaling_a_missing_deployment_is_a_404(kube_client: KubeClient) -> None:
    with pytest.raises(PermanentError) as info:
        serving.scale(kube_client, NS, "tidal-svc-missing", 1)
    assert info.value.status == 404


def test_ready_replicas_reads_the_deployments_status(kube_client: KubeClient, kube) -> None:
    assert serving.ready_replicas(kube_client, NS, KEY) == 0  # not created yet
    serving.apply(kube_client, make_spec())
    assert serving.ready_replicas(kube_client, NS, KEY) == 0  # no status yet
    deployment = deployment_of(kube)
    kube.put("deployments", NS, {**deployment, "status": {"replicas": 2, "readyReplicas": 1}}, group="apps")
    assert serving.ready_replicas(kube_client, NS, KEY) == 1


def test_delete_removes_both_and_again_is_no_error(kube_client: KubeClient, kube) -> None:
    serving.apply(kube_client, make_spec())
    serving.delete(kube_client, NS, KEY)
    assert kube.objects("deployments") == {} and kube.objects("services") == {}
    serving.delete(kube_client, NS, KEY)


def test_forbidden_is_a_permanent_error(kube_client: KubeClient, kube) -> None:
    # The documented RBAC bound in another namespace only: this one refuses everything.
    kube.gate.policy = Policy(documented_rbac(["tidal-other"]))
    with pytest.raises(PermanentError) as info:
        serving.apply(kube_client, make_spec())
    assert info.value.status == 403 and "deployments" in str(info.value)


def test_a_conflict_on_update_is_a_permanent_error(kube_client: KubeClient, kube) -> None:
    serving.apply(kube_client, make_spec())
    kube.handler[f"patch /apis/apps/v1/namespaces/{NS}/deployments/{KEY}"] << 409 << {
        "kind": "Status", "code": 409, "reason": "Conflict", "message": "the object has been modified"}
    with pytest.raises(PermanentError) as info:
        serving.apply(kube_client, make_spec(image="registry.example.com/vllm:0.7"))
    assert info.value.status == 409 and info.value.reason == "Conflict"


def test_an_unavailable_api_is_a_transient_error_after_retries(kube_client: KubeClient, kube, sleeps) -> None:
    kube.gate.outage = Outage(status=503)
    with pytest.raises(TransientError) as info:
        serving.apply(kube_client, make_spec())
    assert info.value.status == 503 and len(sleeps) == kube_client.backoff.max_retries


# --------------------------------------------------------------------- Tidal's pods, never foreign or an attempt's

def test_service_pods_are_tidals_never_foreign_nor_an_attempts() -> None:
    deployment, service = serving.manifests(make_spec())
    pod = as_pod(deployment, "gpu-1")
    assert foreign_usage([pod], "ci") == {}  # not subtracted from the node as a foreign pod's devices are
    assert foreign_usage([pod], "another-instance")["gpu-1"]["nvidia.com/gpu"] == 2  # another Tidal's: foreign
    assert group_pods([pod]) == {}  # the reconciler observes attempts' pods only
    assert find_orphans([pod, service, deployment], set(), instance="ci") == []  # the sweep deletes none of them


def test_node_sync_counts_a_service_pod_as_serving_not_foreign_and_the_scheduler_keeps_off_it(kube_inventory,
                                                                                                kube) -> None:
    from clusters.backends import inventory

    cluster = kube_inventory["cluster"]
    deployment = serving.manifests(make_spec(settings=replace(SETTINGS, instance="ci")))[0]
    foreign = as_pod(serving.manifests(make_spec(settings=replace(SETTINGS, instance="other")))[0], "gpu-1")
    nodesync.nodes_upsert(cluster, [node("gpu-1", product="NVIDIA-H100-80GB-HBM3", rack="r1")],
                          [as_pod(deployment, "gpu-1"), {**foreign, "metadata": {**foreign["metadata"], "name": "f"}}])
    row = Node.objects.get(cluster=cluster, name="gpu-1")
    assert (row.foreign_used, row.serving_used) == (2, 2)  # the other installation's pod is foreign; ours serves
    gpu1, = (n for n in inventory().nodes if n.name.endswith("/gpu-1"))
    # Neither is the scheduler's to place on: 8 allocatable, 2 foreign, 2 held by the service's replica.
    assert (gpu1.devices, gpu1.free, gpu1.foreign, gpu1.serving) == (4, 4, 2, 2)
