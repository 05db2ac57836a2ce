"""Why attempts fail, and which failures are worth a retry: the one table of causes, for every backend.

Backends classify what they saw into a first cause (the Kubernetes backend from container reasons, exit codes and
log lines, `clusters/kube/failures.py`; the simulated one from its injected failures); the failure diagnosis
(`reliability.rules`, connected to `jobs.observations.failure_diagnosis`) may refine it from all the evidence into
one of the causes below. Whether the attempt is retried, and whether the retry counts against the job's own
`retry_limit`, is decided here from the cause's kind, never by a backend:

| kind     | retried                      | counted | causes                                                 |
|----------|------------------------------|---------|--------------------------------------------------------|
| config   | no                           | -       | image_pull, invalid_spec, max_runtime, cancelled        |
| user     | no                           | -       | user_error (a traceback or non-zero exit of the code)  |
| mixed    | within the job's retry limit | yes     | cuda_oom, host_oom, loss_nan, data_error, xid_app,      |
|          |                              |         | pending_timeout, unknown                               |
| infra    | yes, on other nodes          | no      | node_lost, nccl, nccl_timeout, hang, preempted,        |
|          |                              |         | unschedulable                                          |
| hardware | yes, on other nodes          | no      | xid_memory, xid_bus, xid_nvlink (may quarantine a node) |

Infrastructure and hardware failures are the platform's, not the user's: their retries (from the last checkpoint,
avoiding the nodes involved) do not use the job's retry limit, but are bounded by TIDAL_INFRA_RETRY_LIMIT so a job
that breaks every node it touches stops. An exit code the job marks permanent is never retried.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CONFIG, USER, MIXED, INFRA, HARDWARE = "config", "user", "mixed", "infra", "hardware"
KINDS = (CONFIG, USER, MIXED, INFRA, HARDWARE)


@dataclass(frozen=True, slots=True)
class Cause:
    name: str
    kind: str
    label: str


TABLE: tuple[Cause, ...] = (
    Cause("image_pull", CONFIG, "image could not be pulled"),
    Cause("invalid_spec", CONFIG, "configuration error: the workload or its container could not be created"),
    Cause("max_runtime", CONFIG, "ran past its max runtime"),
    Cause("cancelled", CONFIG, "cancelled"),
    Cause("user_error", USER, "error in the training code"),
    Cause("cuda_oom", MIXED, "CUDA out of memory"),
    Cause("host_oom", MIXED, "host memory exhausted (OOMKilled)"),
    Cause("loss_nan", MIXED, "loss diverged (NaN/Inf)"),
    Cause("data_error", MIXED, "data loader or storage error"),
    Cause("xid_app", MIXED, "GPU application fault (Xid 13/31/43)"),
    Cause("unknown", MIXED, "unknown"),
    Cause("node_lost", INFRA, "node lost"),
    Cause("nccl_timeout", INFRA, "NCCL collective timeout"),
    Cause("nccl", INFRA, "NCCL or network error"),
    Cause("hang", INFRA, "hang: no training progress"),
    Cause("preempted", INFRA, "preempted or evicted by the cluster"),
    Cause("unschedulable", INFRA, "a replica could not be bound to its node in time"),
    Cause("pending_timeout", MIXED, "a replica's container never started in time (a slow pull, a volume)"),
    Cause("xid_memory", HARDWARE, "GPU memory / ECC error (Xid 48/63/64/94/95)"),
    Cause("xid_bus", HARDWARE, "GPU fallen off the bus (Xid 79)"),
    Cause("xid_nvlink", HARDWARE, "NVLink error (Xid 74)"),
)
BY_NAME = {cause.name: cause for cause in TABLE}
CAUSES = tuple(BY_NAME)
NOT_RETRIED = frozenset(c.name for c in TABLE if c.kind in (CONFIG, USER))
# Retried without using the job's retry limit (bounded by TIDAL_INFRA_RETRY_LIMIT instead).
NOT_COUNTED = frozenset(c.name for c in TABLE if c.kind in (INFRA, HARDWARE))
HARDWARE_CAUSES = frozenset(c.name for c in TABLE if c.kind == HARDWARE)
NODE_LOST = "node_lost"
UNKNOWN = "unknown"


def kind_of(cause: str) -> str:
    """The kind of `cause` (an unknown name is treated as `unknown`'s)."""
    return BY_NAME.get(cause, BY_NAME[UNKNOWN]).kind


def label_of(cause: str) -> str:
    return BY_NAME[cause].label if cause in BY_NAME else cause


def is_retryable(cause: str, exit_code: int | None = None, permanent_exit_codes: Iterable[int] = ()) -> bool:
    """Whether an attempt that failed this way may be retried at all."""
    if exit_code is not None and exit_code in set(permanent_exit_codes):
        return False
    return cause not in NOT_RETRIED


def counts_against_retry_limit(cause: str) -> bool:
    """Whether a retry after this cause uses one of the job's own retries (infrastructure ones do not)."""
    return cause not in NOT_COUNTED


@dataclass(frozen=True, slots=True)
class RetryDecision:
    retry: bool
    counted: bool  # whether it uses one of the job's retries
    why: str  # why not, when it is not retried


def decide_retry(cause: str, *, exit_code: int | None, permanent_exit_codes: Iterable[int], retries_used: int,
                 retry_limit: int, infra_retries_used: int, infra_retry_limit: int) -> RetryDecision:
    """Retry or not: the cause's kind, the job's permanent exit codes, its retry limit for the failures that count,
    and the platform's limit for those that do not."""
    if not is_retryable(cause, exit_code, permanent_exit_codes):
        kind = kind_of(cause)
        return RetryDecision(False, False, "not retried: a user error" if kind == USER else "not retried")
    if counts_against_retry_limit(cause):
        if retries_used < retry_limit:
            return RetryDecision(True, True, "")
        return RetryDecision(False, True, f"retry limit {retry_limit} reached")
    if infra_retries_used < infra_retry_limit:
        return RetryDecision(True, False, "")
    return RetryDecision(False, False, f"infrastructure retry limit {infra_retry_limit} reached")
