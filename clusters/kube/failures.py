"""Root cause of a failed replica from its exit code, container/pod reason and last log lines. Pure.

| cause        | retryable | from                                                                    |
|--------------|-----------|-------------------------------------------------------------------------|
| image_pull   | no        | ErrImagePull, ImagePullBackOff, InvalidImageName, ErrImageNeverPull    |
| invalid_spec | no        | CreateContainerConfigError, CreateContainerError, RunContainerError    |
| node_lost    | yes       | NodeLost, node NotReady, DeletionByTaintManager, TerminationByKubelet  |
| preempted    | yes       | PreemptionByScheduler, EvictionByEvictionAPI, Preempting               |
| cuda_oom     | yes       | "CUDA out of memory", torch OutOfMemoryError, NPU out of memory (logs) |
| host_oom     | yes       | OOMKilled, eviction for memory pressure                                 |
| nccl         | yes       | NCCL/HCCL errors and collective watchdog timeouts (logs)               |
| user_error   | yes       | a Python traceback or a non-zero exit; keeps the traceback's last frame |
| unknown      | yes       | anything else                                                           |

A replica that never leaves Pending is not failed by Kubernetes; :func:`pending_failure` names it once the
cluster's pending timeout has passed:

| cause           | retryable | from                                                                 |
|-----------------|-----------|----------------------------------------------------------------------|
| unschedulable   | yes       | PodScheduled=False (devices taken by a pod Tidal did not see, taints) |
| pending_timeout | yes       | scheduled, but the container never started (slow pull, volume mount) |

Retries are bounded by the job's retry limit; only a bad image or spec fails at once, as does any exit
code the user marks permanent (``permanent_exit_codes``), whatever the cause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CAUSES = ("cuda_oom", "host_oom", "nccl", "image_pull", "node_lost", "preempted", "user_error",
          "invalid_spec", "unschedulable", "pending_timeout", "unknown")

IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
INVALID_SPEC_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError"})
NODE_LOST_REASONS = frozenset({"NodeLost", "NodeNotReady", "DeletionByTaintManager", "TerminationByKubelet",
                               "DeletionByPodGC", "NodeShutdown", "UnexpectedAdmissionError"})
PREEMPTED_REASONS = frozenset({"PreemptionByScheduler", "EvictionByEvictionAPI", "Preempting", "Preempted"})

_CUDA_OOM = re.compile(r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|NPU out of memory"
                       r"|CUBLAS_STATUS_ALLOC_FAILED|HIP out of memory", re.I)
_NCCL = re.compile(r"NCCL (error|WARN|timeout)|nccl(Internal|System|Remote|Unhandled(Cuda)?|InvalidUsage)Error"
                   r"|ProcessGroupNCCL|Watchdog caught collective operation timeout|NCCL communicator"
                   r"|HCCL|DistBackendError|collective operation timeout", re.I)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)|\w+Error)\b:?(?P<msg>.*)$")


@dataclass(frozen=True)
class Failure:
    cause: str
    retryable: bool
    summary: str
    exit_code: int | None = None
    reason: str = ""
    last_frame: str = ""  # 'train.py:42 in step' for user_error


def last_frame(lines: Sequence[str]) -> tuple[str, str]:
    """(last 'File ..., line N, in f' frame of the last traceback, its exception line)."""
    frame, exception = "", ""
    start = max((i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line), default=-1)
    if start < 0:
        return frame, exception
    for line in lines[start + 1:]:
        match = _FRAME.match(line)
        if match:
            frame = f"{match['file']}:{match['line']} in {match['func'].strip()}"
            continue
        stripped = line.strip()
        if frame and _EXCEPTION.match(stripped):
            exception = stripped
    return frame, exception


def classify(*, exit_code: int | None = None, reason: str = "", message: str = "",
             log_lines: Iterable[str] = (), permanent_exit_codes: Iterable[int] = ()) -> Failure:
    """Decide the cause of one failed replica. ``reason`` is the container-state or pod reason
    (``OOMKilled``, ``ImagePullBackOff``, ``Evicted``, ``NodeLost`` ...)."""
    lines = [str(line) for line in log_lines]
    text = "\n".join(lines[-200:])
    failure = _classify(exit_code, reason, message, lines, text)
    if exit_code is not None and exit_code in set(permanent_exit_codes):
        failure = Failure(failure.cause, False, f"{failure.summary} (exit code {exit_code} is marked permanent)",
                          exit_code, reason, failure.last_frame)
    return failure


def _classify(exit_code: int | None, reason: str, message: str, lines: list[str], text: str) -> Failure:
    def make(cause: str, retryable: bool, summary: str, frame: str = "") -> Failure:
        return Failure(cause, retryable, summary, exit_code, reason, frame)

    if reason in IMAGE_PULL_REASONS:
        return make("image_pull", False, f"image could not be pulled ({reason}): {message}".rstrip(": "))
    if reason in INVALID_SPEC_REASONS:
        return make("invalid_spec", False, f"container could not be created ({reason}): {message}".rstrip(": "))
    if reason in NODE_LOST_REASONS:
        return make("node_lost", True, f"node lost ({reason})")
    if reason in PREEMPTED_REASONS:
        return make("preempted", True, f"preempted ({reason})")
    if _CUDA_OOM.search(text):
        return make("cuda_oom", True, "accelerator out of memory (reduce batch size or enable checkpointing)")
    if reason == "OOMKilled" or (reason == "Evicted" and "memory" in message.lower()):
        return make("host_oom", True, f"host memory exhausted ({reason}); raise the memory request")
    if _NCCL.search(text):
        return make("nccl", True, "NCCL communication error or collective timeout")
    frame, exception = last_frame(lines)
    if frame:
        return make("user_error", True, exception or "Python exception in user code", frame)
    if reason == "Evicted":
        return make("unknown", True, f"evicted: {message}".rstrip(": "))
    if exit_code == 137:
        return make("unknown", True, "killed by SIGKILL (exit code 137)")
    if exit_code is not None and exit_code != 0:
        return make("user_error", True, f"process exited with code {exit_code}")
    return make("unknown", True, reason or message or "unknown failure")


def pending_failure(*, pod: str, node: str, seconds: float, unschedulable: bool, reason: str = "",
                    message: str = "") -> Failure:
    """The cause of an attempt whose replica ``pod`` stayed Pending for ``seconds``, past the cluster's timeout.

    Retryable: the usual culprit (a foreign pod took the placed node's devices between two node syncs) is gone
    from the next snapshot once nodes are synced again, so the retry is placed on capacity that is really free.
    """
    where = f" on {node}" if node else ""
    summary = f"pod {pod} pending for {seconds:.0f} s{where}"
    detail = message or reason
    if detail:
        summary += f": {detail}"
    return Failure("unschedulable" if unschedulable else "pending_timeout", True, summary, None, reason)
