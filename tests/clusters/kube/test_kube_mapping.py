"""Pure mappers: attempt status, failure causes, node inventory, token bucket, backoff."""

from __future__ import annotations

from decimal import Decimal

import pytest

from clusters.kube import names
from clusters.kube.failures import CAUSES as KUBE_CAUSES
from clusters.kube.failures import classify, last_frame
from clusters.kube.nodes import InventorySettings, flavor_for, inventory, pod_requests
from clusters.kube.ratelimit import Backoff, TokenBucket
from clusters.kube.status import attempt_status, replica_state
from jobs.failures import CAUSES as JOB_CAUSES
from jobs.failures import is_retryable


def pod(rank: int, phase: str = "Running", node: str = "n0", *, terminated: dict | None = None,
        waiting: dict | None = None, reason: str = "", message: str = "", conditions: list | None = None,
        deleting: bool = False) -> dict:
    state = {"terminated": terminated} if terminated else {"waiting": waiting} if waiting else {"running": {}}
    status = {"phase": phase, "containerStatuses": [{"name": "main", "state": state}],
              "conditions": conditions or []}
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    meta = {"name": f"p{rank}", "labels": {names.LABEL_ROLE: "worker", names.LABEL_INDEX: str(rank),
                                           names.LABEL_RANK: str(rank)}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": status}


# ------------------------------------------------------------------------------------------ status

def test_running_only_when_every_replica_runs() -> None:
    assert attempt_status([pod(0), pod(1)], expected=2, launcher="pytorch").state == "running"
    assert attempt_status([pod(0)], expected=2, launcher="pytorch").state == "pending"
    pending = pod(1, "Pending", waiting={"reason": "ContainerCreating"})
    status = attempt_status([pod(0), pending], expected=2, launcher="pytorch")
    assert (status.state, status.reason) == ("pending", "ContainerCreating")


def test_success_rule_rank0_for_pytorch_and_ray_all_for_deepspeed_and_command() -> None:
    done0 = pod(0, "Succeeded", terminated={"exitCode": 0, "reason": "Completed"})
    for launcher in ("pytorch", "megatron", "ray"):
        assert attempt_status([done0, pod(1)], expected=2, launcher=launcher).state == "succeeded"
    for launcher in ("deepspeed", "command"):
        assert attempt_status([done0, pod(1)], expected=2, launcher=launcher).state == "running"
        done1 = pod(1, "Succeeded", terminated={"exitCode": 0})
        assert attempt_status([done0, done1], expected=2, launcher=launcher).state == "succeeded"


def test_failed_replica_fails_the_attempt_with_reason_and_exit_code() -> None:
    oom = pod(1, "Failed", node="n1", terminated={"exitCode": 137, "reason": "OOMKilled"})
    status = attempt_status([pod(0), oom], expected=2, launcher="pytorch")
    assert status.state == "failed" and status.reason == "OOMKilled"
    assert "p1 on n1" in status.message and "exit code 137" in status.message
    assert status.failed[0].exit_code == 137
    assert status.avoid_nodes == frozenset()


def test_node_lost_fails_and_marks_the_node_to_avoid() -> None:
    status = attempt_status([pod(0, node="n0"), pod(1, node="n1")], expected=2, launcher="pytorch",
                            not_ready_nodes={"n1"})
    assert status.state == "failed" and status.reason == "NodeNotReady"
    assert status.avoid_nodes == frozenset({"n1"})
    unknown = attempt_status([pod(0, "Unknown", node="n2")], expected=1, launcher="command")
    assert unknown.reason == "NodeLost" and unknown.avoid_nodes == frozenset({"n2"})
    taint = pod(0, node="n3", deleting=True, conditions=[
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}])
    assert attempt_status([taint], expected=1, launcher="command").avoid_nodes == frozenset({"n3"})


def test_evicted_and_image_pull_backoff() -> None:
    evicted = pod(0, "Failed", reason="Evicted", message="The node was low on resource: memory.")
    state = replica_state(evicted)
    assert (state.state, state.reason) == ("failed", "Evicted")
    backoff = pod(0, "Pending", waiting={"reason": "ImagePullBackOff", "message": "not found"})
    assert replica_state(backoff).state == "failed"
    first_try = pod(0, "Pending", waiting={"reason": "ErrImagePull"})
    assert replica_state(first_try).state == "pending"


def test_success_beats_late_failure_of_a_ray_worker() -> None:
    head = pod(0, "Succeeded", terminated={"exitCode": 0})
    worker = pod(1, "Failed", terminated={"exitCode": 1, "reason": "Error"})
    assert attempt_status([head, worker], expected=2, launcher="ray").state == "succeeded"
    assert attempt_status([head, worker], expected=2, launcher="command").state == "failed"


# ---------------------------------------------------------------------------------------- failures

TRACEBACK = """\
Epoch 3: 45%
Traceback (most recent call last):
  File "/workspace/train.py", line 88, in <module>
    main()
  File "/workspace/model.py", line 12, in forward
    x = self.proj(x)
KeyError: 'labels'
"""


def retried(failure) -> bool:
    """What the jobs side decides for this cause (the one table for every backend)."""
    return is_retryable(failure.cause, failure.exit_code)


def test_every_cause_the_classifier_names_is_one_the_jobs_side_knows() -> None:
    assert set(KUBE_CAUSES) <= set(JOB_CAUSES)


def test_oomkilled_is_retryable_host_oom() -> None:
    failure = classify(exit_code=137, reason="OOMKilled")
    assert (failure.cause, retried(failure)) == ("host_oom", True)
    evicted = classify(reason="Evicted", message="The node was low on resource: memory.")
    assert evicted.cause == "host_oom"


def test_cuda_oom_from_log_lines() -> None:
    lines = ["step 100", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    failure = classify(exit_code=1, reason="Error", log_lines=lines)
    assert failure.cause == "cuda_oom" and retried(failure)


def test_nccl_timeout() -> None:
    lines = ["[rank3]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=1024, OpType=ALLREDUCE) ran for 1800000 milliseconds before timing out."]
    failure = classify(exit_code=1, reason="Error", log_lines=lines)
    assert (failure.cause, retried(failure)) == ("nccl", True)
    assert classify(exit_code=1, log_lines=["NCCL error in: ncclUnhandledCudaError"]).cause == "nccl"


@pytest.mark.parametrize("reason", ["ImagePullBackOff", "ErrImagePull", "InvalidImageName"])
def test_image_pull_failure_is_permanent(reason: str) -> None:
    failure = classify(reason=reason, message='pull access denied for "nope"')
    assert (failure.cause, retried(failure)) == ("image_pull", False)


def test_invalid_spec_node_lost_preempted() -> None:
    assert not retried(classify(reason="CreateContainerConfigError"))
    assert classify(reason="NodeLost").cause == "node_lost"
    assert classify(reason="DeletionByTaintManager").cause == "node_lost"
    assert (classify(reason="PreemptionByScheduler").cause, retried(classify(reason="Preempting"))) == (
        "preempted", True)


def test_user_error_keeps_last_frame_and_a_permanent_exit_code_is_not_retried() -> None:
    failure = classify(exit_code=1, reason="Error", log_lines=TRACEBACK.splitlines())
    assert failure.cause == "user_error" and not retried(failure)  # user errors are not retried (issue 28)
    assert failure.last_frame == "/workspace/model.py:12 in forward"
    assert failure.summary == "KeyError: 'labels'"
    marked = classify(exit_code=3, log_lines=TRACEBACK.splitlines())
    assert marked.cause == "user_error" and not is_retryable(marked.cause, marked.exit_code, {3})
    assert classify(exit_code=2).cause == "user_error"
    assert classify().cause == "unknown"
    assert last_frame(["no traceback here"]) == ("", "")


# ------------------------------------------------------------------------------------------- nodes

def node(name: str, *, gpus: int = 8, product: str = "NVIDIA-H100-80GB-HBM3", ready: bool = True,
         cordoned: bool = False, taints: list | None = None, labels: dict | None = None) -> dict:
    node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/arch": "amd64", **(labels or {})}
    if product:
        node_labels["nvidia.com/gpu.product"] = product
    return {"metadata": {"name": name, "labels": node_labels},
            "spec": {"unschedulable": cordoned, "taints": taints or []},
            "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": str(gpus), "rdma/hca": "4"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def other_pod(node_name: str, gpus: int, phase: str = "Running", labels: dict | None = None) -> dict:
    return {"metadata": {"name": "x", "labels": labels or {}}, "spec": {"nodeName": node_name, "containers": [
        {"resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"cpu": "4", "memory": "8Gi"}}}]},
        "status": {"phase": phase}}


RULES = (("nvidia-h100*", "h100-80g"), ("*a100*", "a100"), ("huawei.com/ascend910", "ascend-910b"))


def test_inventory_rows_with_flavor_topology_and_foreign_usage() -> None:
    settings = InventorySettings(flavor_rules=RULES, topology_keys={
        "block": "network.example.com/block", "rack": "topology.kubernetes.io/rack", "switch": "sw"})
    nodes = [
        node("gpu-1", labels={"network.example.com/block": "b1", "topology.kubernetes.io/rack": "r7"},
             taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
        node("gpu-2", product="NVIDIA-A100-SXM4-40GB", ready=False, cordoned=True),
    ]
    pods = [
        other_pod("gpu-1", 2),
        other_pod("gpu-1", 1, phase="Succeeded"),  # finished: holds nothing
        other_pod("gpu-1", 4, labels={names.LABEL_MANAGED: "true", names.LABEL_INSTANCE: "default"}),  # ours
    ]
    first, second = inventory(nodes, pods, settings)
    assert first.flavor == "h100-80g" and first.arch == "amd64" and first.hostname == "gpu-1"
    assert first.allocatable == {"nvidia.com/gpu": 8, "rdma/hca": 4}
    assert first.used_by_others == {"nvidia.com/gpu": 2} and first.free["nvidia.com/gpu"] == 6
    assert first.cpu == Decimal(92) and first.memory == 2**40 - 8 * 2**30
    assert first.topology == {"block": "b1", "rack": "r7"}
    assert first.taints == ({"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"},)
    assert first.ready and not first.cordoned
    assert (second.flavor, second.ready, second.cordoned) == ("a100", False, True)


@pytest.mark.parametrize("requested, cpu, memory", [
    ({"cpu": "4", "memory": "8Gi"}, Decimal(92), 2**40 - 8 * 2**30),
    ({"cpu": "96", "memory": "1Ti"}, Decimal("0.001"), 2**20),  # all taken: still modelled, nothing fits
    ({"cpu": "200", "memory": "2Ti"}, Decimal("0.001"), 2**20),
])
def test_cpu_and_memory_foreign_pods_request_are_left_out_but_never_to_zero(requested, cpu, memory) -> None:
    """0 tells the scheduler a node does not model CPU or memory (it would never limit there)."""
    hog = other_pod("gpu-1", 0)
    hog["spec"]["containers"][0]["resources"]["requests"] = requested
    (row,) = inventory([node("gpu-1")], [hog], InventorySettings(flavor_rules=RULES))
    assert (row.cpu, row.memory) == (cpu, memory)
    bare = node("gpu-2")
    del bare["status"]["allocatable"]["cpu"], bare["status"]["allocatable"]["memory"]
    (row,) = inventory([bare], [hog], InventorySettings(flavor_rules=RULES))
    assert (row.cpu, row.memory) == (0, 0)  # reports none: not modelled


def test_flavor_falls_back_to_device_resource_name() -> None:
    ascend = node("npu-1", gpus=0, product="")
    ascend["status"]["allocatable"]["huawei.com/Ascend910"] = "8"
    (row,) = inventory([ascend], [], InventorySettings(flavor_rules=RULES))
    assert row.flavor == "ascend-910b" and row.allocatable["huawei.com/Ascend910"] == 8
    assert flavor_for("Tesla-T4", RULES) == ""


def test_pod_requests_counts_init_and_sidecars_like_the_scheduler() -> None:
    spec = {"spec": {
        "containers": [{"resources": {"requests": {"cpu": "1"}}}, {"resources": {"requests": {"cpu": "500m"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "4"}}},
                           {"restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}}],
        "overhead": {"cpu": "100m"},
    }}
    assert pod_requests(spec)["cpu"] == Decimal("4.1")


# --------------------------------------------------------------------------------- rate limit/backoff

def test_token_bucket_burst_then_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=10, burst=3, clock=lambda: now[0], sleep=lambda s: None)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.1)
    now[0] = 1.0  # refilled up to burst, minus the reserved one
    assert bucket.reserve() == 0.0
    with pytest.raises(ValueError):
        TokenBucket(qps=0, burst=1)


def test_backoff_exponential_with_jitter_and_cap() -> None:
    backoff = Backoff(base=0.5, cap=4.0, rand=lambda: 1.0)
    assert [backoff.delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert Backoff(base=1.0, rand=lambda: 0.25).delay(2) == 1.0
    assert backoff.delay(0, retry_after=3.0) == 3.0
