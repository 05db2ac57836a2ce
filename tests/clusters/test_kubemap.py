"""The pure mapping Job/Cluster -> RenderJob, Placement, ClusterSettings, InventorySettings, Node fields."""

from __future__ import annotations

from decimal import Decimal

import pytest

from clusters.backends.kubernetes import mapping
from clusters.kube.errors import RenderError
from clusters.kube.nodes import NodeRow
from clusters.kube.render import render
from clusters.kube.spec import ReplicaGroup, ReplicaPlacement
from clusters.models import Cluster
from jobs.models import Attempt, Job
from jobs.selectors import attempt_with_job
from tests.jobs.conftest import admit, submit


@pytest.fixture
def attempt(tenant, kube_inventory) -> Attempt:
    """The job's third attempt (two were preempted), placed on both nodes."""
    job = submit(tenant, kube_inventory["h100"], name="Bert Large", replicas=2, launcher="megatron",
                 checkpoint_path="s3://ckpt/bert", env={"LR": "0.1"}, args=["--steps", "10"],
                 launcher_options={"tensor_parallel": 4, "pipeline_parallel": 2}, permanent_exit_codes=[3])
    job.groups.update(rdma=True, cpu_millis=32000, memory_mib=262144)
    Job.objects.filter(pk=job.pk).update(attempt=3)
    job.refresh_from_db()
    admit(job, kube_inventory["cluster"], ["gpu-1", "gpu-2"])
    return attempt_with_job(job.current_attempt_id)


@pytest.fixture
def job(attempt) -> Job:
    return attempt.job


def test_job_maps_to_render_job(attempt, job, kube_inventory) -> None:
    render_job, placement, settings = mapping.render_inputs(
        attempt, kube_inventory["cluster"], {"gpu-1": "gpu-1.internal", "gpu-2": "gpu-2"})
    assert render_job.job_id == job.pk and render_job.name == "Bert Large" and render_job.project == "vision"
    assert render_job.namespace == settings.namespace == "tidal-vision"
    assert render_job.attempt == 3 and render_job.launcher == "megatron"
    assert render_job.replica_groups == (ReplicaGroup("worker", 2, 8, cpu="32000m", memory="262144Mi", rdma=1),)
    assert render_job.command == ("python", "train.py") and render_job.args == ("--steps", "10")
    assert dict(render_job.env) == {"LR": "0.1"}
    assert render_job.device_resource == "nvidia.com/gpu"
    assert render_job.checkpoint_path == "s3://ckpt/bert"
    assert (render_job.tensor_parallel, render_job.pipeline_parallel) == (4, 2)
    assert render_job.permanent_exit_codes == frozenset({3})
    assert placement.replicas == (ReplicaPlacement("worker", 0, "gpu-1", "gpu-1.internal"),
                                  ReplicaPlacement("worker", 1, "gpu-2", ""))
    assert settings.image_pull_secret == "regcred" and settings.nccl_socket_ifname == "ib0"
    assert dict(settings.nccl_extra_env) == {"NCCL_DEBUG": "INFO"}
    assert settings.termination_grace_seconds == 45 and settings.instance == "ci"
    assert [t.key for t in settings.gpu_tolerations] == ["nvidia.com/gpu", "huawei.com/Ascend910"]
    manifests = render(render_job, placement, settings)  # the mapping feeds the renderer as is
    assert [m["kind"] for m in manifests] == ["ConfigMap", "Service", "Secret", "Pod", "Pod"]


def test_the_run_token_reaches_the_pods_only_through_the_attempts_secret(attempt, job, kube_inventory) -> None:
    """Tracking gives the attempt its run (plain) and a run token (secret): the token is in the Secret and the
    pods refer to it; no pod spec holds it as a literal."""
    from tracking.models import Run
    from tracking.tokens import RunTokenClaim, claim_of

    render_job, placement, settings = mapping.render_inputs(attempt, kube_inventory["cluster"], {})
    run = Run.objects.get(job=job)
    assert render_job.platform_env["TIDAL_RUN_ID"] == str(run.pk)
    assert claim_of(render_job.secret_env["TIDAL_RUN_TOKEN"]) == RunTokenClaim(run.pk, attempt.number)
    manifests = render(render_job, placement, settings)
    (secret,) = [m for m in manifests if m["kind"] == "Secret"]
    token = secret["stringData"]["TIDAL_RUN_TOKEN"]
    for pod in (m for m in manifests if m["kind"] == "Pod"):
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env["TIDAL_RUN_TOKEN"]["valueFrom"]["secretKeyRef"] == {
            "name": secret["metadata"]["name"], "key": "TIDAL_RUN_TOKEN"}
        assert token not in repr(pod)


def test_bad_launcher_options_are_render_errors(attempt, job) -> None:
    job.launcher_options = {"tensor_parallel": "four"}
    with pytest.raises(RenderError, match="tensor_parallel"):
        mapping.render_job(attempt, "tidal-vision")
    job.launcher_options = {"run_as_user": 0}
    with pytest.raises(RenderError, match="run_as_user"):
        mapping.render_job(attempt, "tidal-vision")


def test_run_as_user_option_makes_the_pods_run_as_non_root(attempt, job) -> None:
    assert mapping.render_job(attempt, "tidal-vision").run_as_user is None  # the image's own user
    job.launcher_options = {**job.launcher_options, "run_as_user": 1000}
    assert mapping.render_job(attempt, "tidal-vision").run_as_user == 1000


@pytest.mark.parametrize(("pattern", "expected"), [
    ("tidal-{project}", "tidal-vision"),
    ("{organization}-{project}", "acme-vision"),
    ("ml", "ml"),
])
def test_namespace_pattern(pattern, expected) -> None:
    assert mapping.namespace_for(Cluster(name="c", namespace_pattern=pattern), "vision", "acme") == expected


def test_namespace_pattern_errors_are_render_errors() -> None:
    with pytest.raises(RenderError):
        mapping.namespace_for(Cluster(name="c", namespace_pattern="tidal-{team}"), "vision")


def test_tolerations_accept_keys_and_objects() -> None:
    cluster = Cluster(name="c", gpu_tolerations=["a.com/gpu", {"key": "b", "operator": "Equal", "value": "x",
                                                                "effect": "NoExecute"}])
    tolerations = mapping.cluster_settings(cluster, "ns").gpu_tolerations
    assert [t.to_dict() for t in tolerations] == [
        {"key": "a.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "b", "operator": "Equal", "value": "x", "effect": "NoExecute"}]


def test_node_fields_from_an_inventory_row() -> None:
    row = NodeRow(name="gpu-9", hostname="gpu-9", flavor="h100", product="NVIDIA-H100-80GB-HBM3", arch="arm64",
                  allocatable={"nvidia.com/gpu": 8, "rdma/hca": 1}, used_by_others={"nvidia.com/gpu": 2},
                  free={"nvidia.com/gpu": 6}, cpu=Decimal("95.5"), memory=2 * 1024**3, topology={"rack": "r9"},
                  taints=({"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"},), cordoned=True,
                  ready=False)
    fields = mapping.node_fields(row, "nvidia.com/gpu")
    assert fields == {"hostname": "", "product": "NVIDIA-H100-80GB-HBM3", "devices": 8, "foreign_used": 2,
                      "serving_used": 0, "cpu_millis": 95500, "memory_mib": 2048, "block": "", "rack": "r9",
                      "switch": "", "taints": [{"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}],
                      "cordoned": True, "ready": False, "arch": "arm64"}
