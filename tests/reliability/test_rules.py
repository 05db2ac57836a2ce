"""The diagnosis rules as a table: evidence in, cause class, action and the evidence kept out."""

from __future__ import annotations

import pytest

from jobs import failures
from reliability import rules
from reliability.rules import Evidence, XidEvent, diagnose

TRACEBACK = ["step 120 loss 2.31", "Traceback (most recent call last):",
             '  File "/workspace/train.py", line 88, in <module>', "    main()",
             '  File "/workspace/train.py", line 42, in main', "    batch = next(it)",
             "KeyError: 'input_ids'"]
NCCL_TIMEOUT = ["[rank3]:[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum=4410, OpType=ALLREDUCE, NumelIn=262144000, Timeout(ms)=600000) ran for 600041 "
                "milliseconds before timing out.",
                "[rank3]: RuntimeError: NCCL communicator was aborted on rank 3."]
CASES = [
    ("traceback", Evidence(logs={"worker-0": TRACEBACK}, exit_code=1), "user_error", "fix_code"),
    ("cuda oom beats its traceback", Evidence(logs={"worker-0": [
        *TRACEBACK[:5], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.15 GiB of which 1.2 GiB is free."]}, exit_code=1), "cuda_oom", "reduce_gpu_memory"),
    ("host oom from the reason", Evidence(reasons=("OOMKilled",), exit_code=137), "host_oom", "raise_memory_request"),
    ("nccl timeout", Evidence(logs={"worker-3": NCCL_TIMEOUT}, exit_code=1), "nccl_timeout", "check_network"),
    ("nccl network error", Evidence(logs={"worker-1": [
        "node-7:1234:1290 [2] NCCL INFO Channel 00/0 : 5[2] -> 6[2] [send] via NET/IB/0",
        "node-7:1234:1290 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.2.3<51234> "
        "with error 12, opcode 0, len 0, vendor err 129 (Recv)",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or "
        "there was a network error, NCCL version 2.20.5"]}, exit_code=1), "nccl", "check_network"),
    ("xid 79 outranks the nccl timeout it caused", Evidence(logs={"worker-3": NCCL_TIMEOUT}, exit_code=1,
                                                            xids=(XidEvent(79, "gpu-17", "3"),)),
     "xid_bus", "quarantine_node"),
    ("xid 48 ecc", Evidence(xids=(XidEvent(48, "gpu-2", "0"),), exit_code=1), "xid_memory", "quarantine_node"),
    ("xid 94 contained ecc", Evidence(xids=(XidEvent(94, "gpu-2", "5"),)), "xid_memory", "quarantine_node"),
    ("xid 63 row remap", Evidence(xids=(XidEvent(63, "gpu-2", "5"),)), "xid_memory", "retry_elsewhere"),
    ("xid 74 nvlink", Evidence(xids=(XidEvent(74, "gpu-4", "1"),)), "xid_nvlink", "retry_elsewhere"),
    ("xid 13 application", Evidence(xids=(XidEvent(13, "gpu-4", "1"),), exit_code=1), "xid_app", "fix_code"),
    ("xid from the kernel log", Evidence(logs={"worker-0": [
        "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."]}),
     "xid_bus", "quarantine_node"),
    ("nan loss alert", Evidence(alerts=("non_finite: train/loss is NaN at step 5120",), exit_code=1,
                                logs={"worker-0": TRACEBACK}), "loss_nan", "lower_lr"),
    ("data loader", Evidence(logs={"worker-0": [
        "RuntimeError: DataLoader worker (pid 4411) is killed by signal: Bus error. It is possible that dataloader's "
        "workers are out of shared memory."]}, exit_code=1), "data_error", "check_data"),
    ("storage io", Evidence(logs={"worker-0": ["OSError: [Errno 5] Input/output error: '/data/shard-00017.bin'"]},
                            exit_code=1), "data_error", "check_data"),
    ("image pull", Evidence(reasons=("ImagePullBackOff",)), "image_pull", "fix_image"),
    ("config error", Evidence(reasons=("CreateContainerConfigError",),
                              k8s_events=('Error: secret "hf-token" not found',)), "invalid_spec", "fix_spec"),
    ("node lost", Evidence(outcome="lost", node_conditions=("gpu-9: Ready=False",)), "node_lost",
     "retry_elsewhere"),
    ("preempted", Evidence(outcome="preempted"), "preempted", "retry_elsewhere"),
    ("cancelled", Evidence(outcome="cancelled"), "cancelled", "none"),
    ("max runtime", Evidence(outcome="failed", cause="max_runtime"), "max_runtime", "raise_max_runtime"),
    ("hang", Evidence(progress=("no new step for 130 s after step 800 (recent step time 4.0 s; bound 60 s)",)),
     "hang", "restart_from_checkpoint"),
    ("a bare exit code", Evidence(exit_code=2), "user_error", "fix_code"),
    ("nothing known", Evidence(), "unknown", "investigate"),
]


@pytest.mark.parametrize("name, evidence, cause, action", CASES, ids=[c[0] for c in CASES])
def test_the_table(name, evidence, cause, action):
    found = diagnose(evidence)
    assert (found.cause, found.action) == (cause, action), found
    assert found.cause in failures.CAUSES and 0 < found.confidence <= 1


def test_every_class_of_the_issue_has_a_case():
    asked = {"user_error", "cuda_oom", "host_oom", "nccl_timeout", "nccl", "xid_memory", "xid_bus", "xid_app",
             "xid_nvlink", "hang", "loss_nan", "data_error", "image_pull", "invalid_spec", "node_lost", "preempted",
             "cancelled", "max_runtime"}
    assert asked <= {case[2] for case in CASES}
    assert asked <= set(failures.CAUSES)


def test_evidence_keeps_log_line_numbers_and_the_xid_node():
    found = diagnose(Evidence(logs={"worker-3": ["noise", *NCCL_TIMEOUT]}, first_line={"worker-3": 951},
                              xids=(XidEvent(79, "gpu-17", "3", seconds_before_end=40),)))
    assert found.nodes == ("gpu-17",) and found.quarantine == rules.QUARANTINE_NOW
    xid = next(item for item in found.evidence if item.source == rules.XID)
    assert xid.text == "Xid 79 on gpu-17 GPU 3, 40 s before the attempt ended" and xid.node == "gpu-17"
    nccl = next(item for item in found.evidence if item.source == rules.LOG)  # the symptom is kept as evidence
    assert (nccl.replica, nccl.line) == ("worker-3", 952) and "Watchdog caught" in nccl.text


def test_the_user_error_summary_names_the_exception():
    found = diagnose(Evidence(logs={"worker-0": TRACEBACK}, exit_code=1))
    assert "KeyError: 'input_ids'" in found.summary and "line 7" in found.summary


def test_an_added_pattern_wins_a_tie_and_the_builtin_rules_stay():
    custom = rules.Rule(r"KeyError: 'input_ids'", rules.LOG, "data_error", 0.9, "check_data", "ours")
    found = diagnose(Evidence(logs={"worker-0": TRACEBACK}, exit_code=1), rules.ruleset([custom]))
    assert found.cause == "data_error" and any(item.rule == "ours" for item in found.evidence)
    assert diagnose(Evidence(reasons=("OOMKilled",)), rules.ruleset([custom])).cause == "host_oom"


@pytest.mark.parametrize("rule, field", [
    (rules.Rule("(unclosed", rules.LOG, "nccl", 0.8, ""), "pattern"),
    (rules.Rule(".*", rules.LOG, "nccl", 0.8, ""), "pattern"),  # matches everything
    (rules.Rule("  ", rules.LOG, "nccl", 0.8, ""), "pattern"),
    (rules.Rule("x", "dmesg", "nccl", 0.8, ""), "source"),
    (rules.Rule("x", rules.LOG, "gremlins", 0.8, ""), "cause"),
    (rules.Rule("x", rules.LOG, "nccl", 1.5, ""), "confidence"),
    (rules.Rule("x", rules.LOG, "nccl", 0.8, "pray"), "action"),
    (rules.Rule("x", rules.LOG, "nccl", 0.8, "", quarantine="maybe"), "quarantine"),
])
def test_a_bad_rule_names_its_field(rule, field):
    with pytest.raises(rules.InvalidRule) as refused:
        rules.validate(rule)
    assert refused.value.field == field


def test_every_builtin_rule_is_valid_and_its_action_known():
    for rule in rules.BUILTIN:
        if rule.cause:  # the backend-cause rule votes for the backend's own class
            rules.validate(rule)
        assert not rule.action or rule.action in rules.ACTIONS


def test_a_context_is_for_log_rules_and_must_compile():
    with pytest.raises(rules.InvalidRule) as refused:
        rules.validate(rules.Rule("x", rules.REASON, "nccl", 0.8, "", context="y"))
    assert refused.value.field == "context"
    with pytest.raises(rules.InvalidRule) as refused:
        rules.validate(rules.Rule("x", rules.LOG, "nccl", 0.8, "", context="(y"))
    assert refused.value.field == "context"
