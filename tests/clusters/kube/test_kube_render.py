"""render(): every launcher and option validated against the official schemas (kubernetes-validate, strict)."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

import kubernetes_validate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters.kube import names
from clusters.kube.envvars import RESERVED_ENV, check_user_env
from clusters.kube.errors import ParallelismError, PlacementError, RenderError, ReservedEnvError
from clusters.kube.quantity import is_quantity, parse_quantity
from clusters.kube.render import PARENT_UID_PLACEHOLDER, bind_owner, render
from clusters.kube.spec import ClusterSettings, Placement, RenderJob, ReplicaGroup, ReplicaPlacement
from core.k8snames import is_dns1123_label, is_label_value, label_key_problem

K8S_VERSION = "1.37.0"  # newest schema set kubernetes-validate 1.37 ships with a -strict variant
LONG_NAME = "Fine-tune Llama 3.1 405B Instruct on the complete multilingual corpus, v2 (final!!)"


def make_job(launcher: str = "pytorch", *, replicas: int = 2, devices: int = 8, rdma: int = 0,
             name: str = "llama-pretrain", **kwargs) -> RenderJob:
    if launcher == "ray":
        groups = (ReplicaGroup("head", 1, devices, "8", "64Gi", rdma),
                  ReplicaGroup("worker", max(replicas - 1, 1), devices, "8", "64Gi", rdma))
    else:
        groups = (ReplicaGroup("worker", replicas, devices, "16", "128Gi", rdma),)
    defaults = dict(job_id=1234, name=name, project="nlp-research", namespace="tidal-nlp", attempt=2,
                    launcher=launcher, image="registry.example.com/train:1.0", replica_groups=groups,
                    command=("python", "train.py") if launcher == "command" else (),
                    args=("--epochs", "3"), env={"WANDB_MODE": "offline"}, checkpoint_path="s3://ckpt/1234",
                    ray_entrypoint="python tune.py" if launcher == "ray" else "",
                    tensor_parallel=2 if launcher == "megatron" else 1,
                    pipeline_parallel=2 if launcher == "megatron" else 1)
    defaults.update(kwargs)
    return RenderJob(**defaults)


def place(job: RenderJob) -> Placement:
    return Placement(tuple(ReplicaPlacement(g.role, i, f"gpu-node-{g.role}-{i}")
                           for g in job.replica_groups for i in range(g.replicas)))


def pods(manifests: list[dict]) -> list[dict]:
    return [m for m in manifests if m["kind"] == "Pod"]


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0]["env"]}


def check_names_and_quantities(manifest: dict) -> None:
    meta = manifest["metadata"]
    assert is_dns1123_label(meta["name"]), meta["name"]
    if manifest["kind"] == "Service":
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", meta["name"])  # a Service's name is a DNS-1035 label
    for key, value in meta["labels"].items():
        assert label_key_problem(key) is None and is_label_value(value), (key, value)
    if manifest["kind"] == "Pod":
        spec = manifest["spec"]
        assert is_dns1123_label(spec["hostname"])
        for container in spec["containers"]:
            for section in ("requests", "limits"):
                for resource, quantity in container["resources"][section].items():
                    assert is_quantity(quantity), (resource, quantity)
            requests, limits = container["resources"]["requests"], container["resources"]["limits"]
            for resource in limits:
                if "/" in resource:  # extended resources: requests must equal limits
                    assert requests[resource] == limits[resource]
        for volume in spec["volumes"]:
            if "emptyDir" in volume:
                assert is_quantity(volume["emptyDir"]["sizeLimit"])


MATRIX = list(itertools.product(
    ["pytorch", "deepspeed", "megatron", "ray", "command"],
    [0, 2],  # rdma devices per replica
    [1, 4],  # replicas
    ["llama-pretrain", LONG_NAME],
))


@pytest.mark.parametrize(("launcher", "rdma", "replicas", "name"), MATRIX)
def test_every_manifest_is_schema_valid(launcher: str, rdma: int, replicas: int, name: str) -> None:
    settings = ClusterSettings(image_pull_secret="regcred", nccl_extra_env={"NCCL_DEBUG": "WARN"})
    job = make_job(launcher, replicas=replicas, rdma=rdma, name=name, secret_env={"TIDAL_RUN_TOKEN": "tok-123"},
                   platform_env={"TIDAL_URL": "https://tidal.example.com"}, run_as_user=1000 if replicas > 1 else None)
    manifests = render(job, place(job), settings)
    for manifest in manifests:
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
        check_names_and_quantities(manifest)
    bound = [bind_owner(m, "6f1c2a3e-1111-2222-3333-444455556666") for m in manifests[1:]]
    for manifest in bound:
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
    assert len(pods(manifests)) == job.total_replicas


def test_strict_validation_catches_unknown_fields() -> None:
    job = make_job()
    pod = pods(render(job, place(job), ClusterSettings()))[0]
    pod["spec"]["nodeNmae"] = "typo"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_objects_parent_first_with_owner_references_and_labels() -> None:
    job = make_job("deepspeed", replicas=3, secret_env={"TIDAL_RUN_TOKEN": "secret"})
    manifests = render(job, place(job), ClusterSettings(instance="prod"))
    kinds = [m["kind"] for m in manifests]
    assert kinds == ["ConfigMap", "Service", "ConfigMap", "Secret", "Pod", "Pod", "Pod"]
    parent = manifests[0]
    assert parent["metadata"]["name"] == "tidal-1234-llama-pretrain-a2"
    assert "ownerReferences" not in parent["metadata"]
    for child in manifests[1:]:
        (ref,) = child["metadata"]["ownerReferences"]
        assert ref == {"apiVersion": "v1", "kind": "ConfigMap", "name": parent["metadata"]["name"],
                       "uid": PARENT_UID_PLACEHOLDER, "controller": True}
        labels = child["metadata"]["labels"]
        assert labels[names.LABEL_JOB] == "1234" and labels[names.LABEL_ATTEMPT] == "2"
        assert labels[names.LABEL_PROJECT] == "nlp-research" and labels[names.LABEL_INSTANCE] == "prod"
        assert labels[names.LABEL_MANAGED] == "true"
    assert bind_owner(manifests[1], "u-1")["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert "ownerReferences" not in bind_owner(manifests[1], None)["metadata"]
    assert manifests[1]["metadata"]["ownerReferences"][0]["uid"] == ""  # bind_owner copies


def test_pods_pinned_by_required_node_affinity_not_node_name() -> None:
    job = make_job(replicas=2)
    placement = Placement((ReplicaPlacement("worker", 0, "node-a"),
                           ReplicaPlacement("worker", 1, "ip-10-0-0-7.ec2.internal", hostname="ip-10-0-0-7")))
    first, second = pods(render(job, placement, ClusterSettings()))
    assert "nodeName" not in first["spec"]
    terms = first["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}]}]
    second_terms = second["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert second_terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["ip-10-0-0-7"]
    assert second["metadata"]["annotations"][names.ANNOTATION_NODE] == "ip-10-0-0-7.ec2.internal"


def test_headless_service_for_rendezvous() -> None:
    job = make_job(replicas=2)
    manifests = render(job, place(job), ClusterSettings())
    service = next(m for m in manifests if m["kind"] == "Service")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    for pod in pods(manifests):
        assert all(pod["metadata"]["labels"][k] == v for k, v in service["spec"]["selector"].items())
        assert pod["spec"]["subdomain"] == service["metadata"]["name"]


def test_single_replica_has_no_service_and_local_master() -> None:
    job = make_job(replicas=1)
    manifests = render(job, place(job), ClusterSettings())
    assert [m["kind"] for m in manifests] == ["ConfigMap", "Pod"]
    env = env_of(manifests[1])
    assert env["MASTER_ADDR"] == "localhost" and env["WORLD_SIZE"] == "1"
    assert "subdomain" not in manifests[1]["spec"]


def test_pytorch_rendezvous_env() -> None:
    job = make_job("pytorch", replicas=3, devices=8)
    all_pods = pods(render(job, place(job), ClusterSettings()))
    master = "tidal-1234-llama-pretrain-a2-worker-0.tidal-1234-llama-pretrain-a2.tidal-nlp.svc.cluster.local"
    for rank, pod in enumerate(all_pods):
        env = env_of(pod)
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == master
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "29500"
        assert env["WORLD_SIZE"] == env["NNODES"] == env["PET_NNODES"] == "3"
        assert env["RANK"] == env["NODE_RANK"] == env["PET_NODE_RANK"] == str(rank)
        assert env["NPROC_PER_NODE"] == env["PET_NPROC_PER_NODE"] == "8"
        assert pod["metadata"]["labels"][names.LABEL_RANK] == str(rank)
        container = pod["spec"]["containers"][0]
        assert container["command"] == ["torchrun"] and container["args"] == ["--epochs", "3"]
        assert container["ports"] == [{"name": "rdzv", "containerPort": 29500, "protocol": "TCP"}]


def test_deepspeed_hostfile_mounted_at_default_path() -> None:
    job = make_job("deepspeed", replicas=2, devices=4)
    manifests = render(job, place(job), ClusterSettings())
    hostfile = next(m for m in manifests if m["metadata"]["name"].endswith("-hostfile"))
    lines = hostfile["data"]["hostfile"].splitlines()
    assert lines == [f"tidal-1234-llama-pretrain-a2-worker-{i}.tidal-1234-llama-pretrain-a2.tidal-nlp.svc.cluster.local"
                     " slots=4" for i in range(2)]
    pod = pods(manifests)[1]
    container = pod["spec"]["containers"][0]
    assert {"name": "hostfile", "mountPath": "/job", "readOnly": True} in container["volumeMounts"]
    assert {"name": "hostfile", "configMap": {"name": hostfile["metadata"]["name"]}} in pod["spec"]["volumes"]
    assert container["command"][:3] == ["deepspeed", "--hostfile=/job/hostfile", "--no_ssh"]
    assert "--node_rank=$(NODE_RANK)" in container["command"]
    assert env_of(pod)["RANK"] == "1"


def test_megatron_parallel_sizes_and_divisibility() -> None:
    job = make_job("megatron", replicas=2, devices=8, tensor_parallel=4, pipeline_parallel=2)
    env = env_of(pods(render(job, place(job), ClusterSettings()))[0])
    assert env["TENSOR_MODEL_PARALLEL_SIZE"] == "4"
    assert env["PIPELINE_MODEL_PARALLEL_SIZE"] == "2"
    assert env["DATA_PARALLEL_SIZE"] == "2"  # 16 processes / (4 x 2)
    bad = replace(job, tensor_parallel=3)
    with pytest.raises(ParallelismError, match=r"3 x pipeline parallel size 2 = 6 does not divide the world size 16"):
        render(bad, place(bad), ClusterSettings())
    with pytest.raises(ParallelismError):
        render(replace(job, pipeline_parallel=0), place(job), ClusterSettings())


def test_ray_head_and_workers() -> None:
    job = make_job("ray", replicas=3, devices=2)
    head, *workers = pods(render(job, place(job), ClusterSettings()))
    head_script = head["spec"]["containers"][0]["command"][2]
    assert head["spec"]["containers"][0]["command"][:2] == ["bash", "-c"]
    assert "ray start --head --port=6379" in head_script and "--dashboard-port=8265" in head_script
    assert "--num-gpus=2" in head_script
    assert head_script.rstrip().endswith("python tune.py")
    assert {p["containerPort"] for p in head["spec"]["containers"][0]["ports"]} == {6379, 8265, 10001}
    env = env_of(workers[0])
    assert env["RAY_ADDRESS"].endswith(".svc.cluster.local:6379")
    assert env["RAY_ADDRESS"].startswith("tidal-1234-llama-pretrain-a2-head-0.")
    assert env["RAY_DASHBOARD_ADDRESS"].endswith(":8265") and env["TIDAL_RAY_NODES"] == "3"
    assert 'ray start --address="$RAY_ADDRESS"' in workers[0]["spec"]["containers"][0]["command"][2]
    ascend = replace(job, device_resource="huawei.com/Ascend910")
    script = pods(render(ascend, place(ascend), ClusterSettings()))[0]["spec"]["containers"][0]["command"][2]
    assert """--resources='{"Ascend910": 2}'""" in script


def test_ray_needs_single_head_and_entrypoint() -> None:
    job = make_job("ray")
    with pytest.raises(RenderError, match="entrypoint"):
        render(replace(job, ray_entrypoint=""), place(job), ClusterSettings())
    groups = (ReplicaGroup("head", 2), ReplicaGroup("worker", 1))
    bad = replace(job, replica_groups=groups)
    with pytest.raises(RenderError, match="exactly 1 replica"):
        render(bad, place(bad), ClusterSettings())


def test_command_launcher_runs_command_as_given() -> None:
    job = make_job("command", replicas=2, command=("bash", "-lc", "python eval.py"), args=())
    pod = pods(render(job, place(job), ClusterSettings()))[1]
    assert pod["spec"]["containers"][0]["command"] == ["bash", "-lc", "python eval.py"]
    assert "args" not in pod["spec"]["containers"][0]
    assert env_of(pod)["RANK"] == "1"
    with pytest.raises(RenderError, match="needs a command"):
        render(replace(job, command=()), place(job), ClusterSettings())


def test_common_pod_settings_rdma_on() -> None:
    settings = ClusterSettings(nccl_socket_ifname="ib0", nccl_extra_env={"NCCL_IB_HCA": "mlx5", "NCCL_DEBUG": "WARN"},
                               termination_grace_seconds=120, default_shm_size="32Gi", rdma_resource="rdma/hca_shared")
    job = make_job(rdma=1, env={"NCCL_DEBUG": "INFO"}, secret_env={"TIDAL_RUN_TOKEN": "tok"})
    pod = pods(render(job, place(job), settings))[0]
    container = pod["spec"]["containers"][0]
    resources = container["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == "8"
    assert container["resources"]["limits"]["rdma/hca_shared"] == "1"
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "privileged": False,
                                            "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}
    env = env_of(pod)
    assert env["NCCL_SOCKET_IFNAME"] == "ib0" and "NCCL_IB_DISABLE" not in env
    assert env["NCCL_IB_HCA"] == "mlx5" and env["NCCL_DEBUG"] == "INFO"  # user env wins over cluster extras
    assert env["TIDAL_CHECKPOINT_PATH"] == "s3://ckpt/1234" and env["TIDAL_ATTEMPT"] == "2"
    assert env["TIDAL_RUN_TOKEN"] == {"secretKeyRef": {"name": "tidal-1234-llama-pretrain-a2-token",
                                                       "key": "TIDAL_RUN_TOKEN"}}
    assert pod["spec"]["terminationGracePeriodSeconds"] == 120
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}} in pod["spec"]["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    assert pod["spec"]["automountServiceAccountToken"] is False


def test_common_pod_settings_rdma_off_and_cpu_only() -> None:
    job = make_job(devices=0, shm_size="2Gi")
    pod = pods(render(job, place(job), ClusterSettings(image_pull_secret="regcred")))[0]
    container = pod["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    env = env_of(pod)
    assert env["NCCL_IB_DISABLE"] == "1" and env["NPROC_PER_NODE"] == "1"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "2Gi"


def test_user_env_comes_after_platform_env_so_it_can_reference_it() -> None:
    job = make_job(env={"MY_ENDPOINT": "$(MASTER_ADDR):1234"})
    env = pods(render(job, place(job), ClusterSettings()))[0]["spec"]["containers"][0]["env"]
    order = [e["name"] for e in env]
    assert order.index("MY_ENDPOINT") > order.index("MASTER_ADDR")


@pytest.mark.parametrize("name", ["MASTER_ADDR", "RANK", "WORLD_SIZE", "PET_NNODES", "TIDAL_ATTEMPT",
                                  "TIDAL_ANYTHING", "NCCL_SOCKET_IFNAME", "RAY_ADDRESS"])
def test_reserved_env_rejected(name: str) -> None:
    job = make_job(env={"OK": "1", name: "x"})
    with pytest.raises(ReservedEnvError) as info:
        render(job, place(job), ClusterSettings())
    assert info.value.names == [name]
    assert name in str(info.value)
    assert info.value.code == "reserved_env"


def test_reserved_env_is_exposed_for_the_serializer() -> None:
    assert {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "TIDAL_CHECKPOINT_PATH"} <= RESERVED_ENV
    check_user_env({"HF_HOME": "/cache", "NCCL_DEBUG": "INFO"})
    with pytest.raises(ReservedEnvError, match="MASTER_PORT, RANK"):
        check_user_env({"RANK": "0", "MASTER_PORT": "1"})
    for bad in ("1BAD", "OK\n"):
        with pytest.raises(RenderError, match="invalid environment variable"):
            check_user_env({bad: "x"})


def test_long_names_are_deterministic_unique_and_short() -> None:
    job = make_job(name=LONG_NAME, replicas=2, secret_env={"TIDAL_RUN_TOKEN": "t"})
    first = render(job, place(job), ClusterSettings())
    again = render(job, place(job), ClusterSettings())
    assert first == again
    other = render(replace(job, name=LONG_NAME + " v3"), place(job), ClusterSettings())
    names_first = {m["metadata"]["name"] for m in first}
    names_other = {m["metadata"]["name"] for m in other}
    assert not names_first & names_other
    for manifest in first:
        assert len(manifest["metadata"]["name"]) <= 63
    assert first[0]["metadata"]["annotations"][names.ANNOTATION_JOB_NAME] == LONG_NAME
    pod_names = [m["metadata"]["name"] for m in pods(first)]
    assert all(n.endswith(f"-a2-worker-{i}") for i, n in enumerate(pod_names))
    long_project = replace(job, project="p" * 80)
    label = render(long_project, place(long_project), ClusterSettings())[0]["metadata"]["labels"][names.LABEL_PROJECT]
    assert len(label) <= 63


def test_names_module_helpers() -> None:
    assert names.object_name("tidal-1", "Hello World!", "a1") == "tidal-1-hello-world-a1"
    long = names.object_name("tidal-1", "x" * 100, "a1-worker-3")
    assert len(long) == 63 and long.endswith("-a1-worker-3") and is_dns1123_label(long)
    assert names.label_value("a" * 100) == names.label_value("a" * 100)
    assert len(names.label_value("a" * 100)) <= 63


@pytest.mark.parametrize(("field", "value", "match"), [
    ("image", " ", "image"),
    ("image", "ghcr.io/Acme/train:1", "image"),
    ("image", "train:1\n", "image"),
    ("namespace", "ns\n", "namespace"),
    ("namespace", "Bad_NS", "namespace"),
    ("launcher", "horovod", "unknown launcher"),
    ("shm_size", "lots", "shm size"),
    ("master_port", 70000, "master_port"),
])
def test_invalid_specs(field: str, value, match: str) -> None:
    job = replace(make_job(), **{field: value})
    with pytest.raises(RenderError, match=match):
        render(job, place(job), ClusterSettings())


def test_invalid_groups() -> None:
    base = make_job()
    for groups, match in [
        ((), "at least one"),
        ((ReplicaGroup("Worker", 1),), "lowercase DNS label"),
        ((ReplicaGroup("w", 1, memory="4 GB"),), "not a Kubernetes quantity"),
        ((ReplicaGroup("w", 0),), "replicas must be"),
        ((ReplicaGroup("a", 1, rdma=1), ReplicaGroup("b", 1)), "RDMA"),
        ((ReplicaGroup("a", 1), ReplicaGroup("a", 1)), "distinct"),
    ]:
        job = replace(base, replica_groups=groups)
        with pytest.raises(RenderError, match=match):
            render(job, Placement(()), ClusterSettings())


def test_placement_must_cover_every_replica_once() -> None:
    job = make_job(replicas=2)
    with pytest.raises(PlacementError, match="missing"):
        render(job, Placement((ReplicaPlacement("worker", 0, "n1"),)), ClusterSettings())
    dup = Placement((ReplicaPlacement("worker", 0, "n1"),) * 2 + (ReplicaPlacement("worker", 1, "n2"),))
    with pytest.raises(PlacementError):
        render(job, dup, ClusterSettings())


def test_quantity_parsing() -> None:
    assert parse_quantity("500m") == parse_quantity("0.5")
    assert parse_quantity("16Gi") == 16 * 2**30
    assert parse_quantity("1e3") == 1000
    assert not is_quantity("4 GB") and not is_quantity("") and is_quantity("+1.5k")
    assert not is_quantity("16Gi\n")


def test_retry_attempt_gets_new_names_same_checkpoint() -> None:
    """OOMKilled -> retry: the next attempt resumes from the same checkpoint path with a new attempt number,
    and its objects never collide with the failed attempt's (which cleanup may still be deleting)."""
    job = make_job(replicas=2)
    failed = render(job, place(job), ClusterSettings())
    retry = render(replace(job, attempt=3), place(job), ClusterSettings())
    assert not {m["metadata"]["name"] for m in failed} & {m["metadata"]["name"] for m in retry}
    env = env_of(pods(retry)[0])
    assert env["TIDAL_ATTEMPT"] == "3" and env["TIDAL_CHECKPOINT_PATH"] == "s3://ckpt/1234"


@pytest.mark.parametrize("program", ["deepspeed", "/usr/local/bin/deepspeed"])
def test_deepspeed_per_node_flags_go_after_the_jobs_own_deepspeed(program: str) -> None:
    """The API requires a command, so a deepspeed job always names one: without the per-node flags the launcher on
    every pod would ssh into every host of the hostfile and start the whole job."""
    job = make_job("deepspeed", replicas=2, command=(program, "--bind_cores_to_rank", "finetune.py"))
    for rank, pod in enumerate(pods(render(job, place(job), ClusterSettings()))):
        container = pod["spec"]["containers"][0]
        assert container["command"] == [program, "--hostfile=/job/hostfile", "--no_ssh", "--node_rank=$(NODE_RANK)",
                                        "--master_addr=$(MASTER_ADDR)", "--master_port=$(MASTER_PORT)",
                                        "--bind_cores_to_rank", "finetune.py"]
        assert container["args"] == ["--epochs", "3"] and env_of(pod)["NODE_RANK"] == str(rank)


def test_a_deepspeed_job_command_that_is_not_the_launcher_runs_as_given() -> None:
    job = make_job("deepspeed", replicas=2, command=("python", "finetune.py"))
    pod = pods(render(job, place(job), ClusterSettings()))[0]
    assert pod["spec"]["containers"][0]["command"] == ["python", "finetune.py"]  # one process per pod


@settings(max_examples=150, deadline=None, derandomize=True)
@given(name=st.text(min_size=1, max_size=300), project=st.text(min_size=1, max_size=60),
       job_id=st.integers(min_value=1, max_value=2**63 - 1), attempt=st.integers(min_value=1, max_value=999))
def test_no_user_string_reaches_an_object_name_or_a_label_unescaped(name, project, job_id, attempt):
    """Whatever a job is called (emoji, newlines, quotes, 300 characters) and whatever its project's name holds, every
    object name, hostname and label the renderer writes is valid for Kubernetes; the raw text survives only in
    annotations, which take any string."""
    job = make_job("deepspeed", name=name, project=project, job_id=job_id, attempt=attempt)
    manifests = render(job, place(job), ClusterSettings())
    for manifest in manifests:
        check_names_and_quantities(manifest)
        assert manifest["metadata"]["annotations"][names.ANNOTATION_JOB_NAME] == name
