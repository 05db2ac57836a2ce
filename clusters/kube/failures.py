"""Root cause of a failed replica from its exit code, container/pod reason and last log lines. Pure.

| cause        | from                                                                    |
|--------------|-------------------------------------------------------------------------|
| image_pull   | ErrImagePull, ImagePullBackOff, InvalidImageName, ErrImageNeverPull    |
| invalid_spec | CreateContainerConfigError, CreateContainerError, RunContainerError    |
| node_lost    | NodeLost, node NotReady, DeletionByTaintManager, TerminationByKubelet  |
| preempted    | PreemptionByScheduler, EvictionByEvictionAPI, Preempting               |
| cuda_oom     | "CUDA out of memory", torch OutOfMemoryError, NPU out of memory (logs) |
| host_oom     | OOMKilled, eviction for memory pressure                                 |
| nccl         | NCCL/HCCL errors and collective watchdog timeouts (logs)               |
| user_error   | a Python traceback or a non-zero exit; keeps the traceback's last frame |
| unknown      | anything else                                                           |

A replica that never leaves Pending is not failed by Kubernetes; :func:`pending_failure` names it once the
cluster's pending timeout has passed:

| cause           | from                                                                 |
|-----------------|----------------------------------------------------------------------|
| unschedulable   | PodScheduled=False (devices taken by a pod Tidal did not see, taints) |
| pending_timeout | scheduled, but the container never started (slow pull, volume mount) |

Whether a cause is retried, and the job's permanent exit codes, are decided on the jobs side (`jobs.failures`),
the same for every backend.
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
             log_lines: Iterable[str] = ()) -> Failure:
    """Decide the cause of one failed replica. ``reason`` is the container-state or pod reason
    (``OOMKilled``, ``ImagePullBackOff``, ``Evicted``, ``NodeLost`` ...)."""
    lines = [str(line) for line in log_lines]
    return _classify(exit_code, reason, message, lines, "\n".join(lines[-200:]))


def _classify(exit_code: int | None, reason: str, message: str, lines: list[str], text: str) -> Failure:
    def make(cause: str, summary: str, frame: str = "") -> Failure:
        return Failure(cause, summary, exit_code, reason, frame)

    if reason in IMAGE_PULL_REASONS:
        return make("image_pull", f"image could not be pulled ({reason}): {message}".rstrip(": "))
    if reason in INVALID_SPEC_REASONS:
        return make("invalid_spec", f"container could not be created ({reason}): {message}".rstrip(": "))
    if reason in NODE_LOST_REASONS:
        return make("node_lost", f"node lost ({reason})")
    if reason in PREEMPTED_REASONS:
        return make("preempted", f"preempted ({reason})")
    if _CUDA_OOM.search(text):
        return make("cuda_oom", "accelerator out of memory (reduce batch size or enable checkpointing)")
    if reason == "OOMKilled" or (reason == "Evicted" and "memory" in message.lower()):
        return make("host_oom", f"host memory exhausted ({reason}); raise the memory request")
    if _NCCL.search(text):
        return make("nccl", "NCCL communication error or collective timeout")
    frame, exception = last_frame(lines)
    if frame:
        return make("user_error", exception or "Python exception in user code", frame)
    if reason == "Evicted":
        return make("unknown", f"evicted: {message}".rstrip(": "))
    if exit_code == 137:
        return make("unknown", "killed by SIGKILL (exit code 137)")
    if exit_code is not None and exit_code != 0:
        return make("user_error", f"process exited with code {exit_code}")
    return make("unknown", reason or message or "unknown failure")


def pending_failure(*, pod: str, node: str, seconds: float, unschedulable: bool, reason: str = "",
                    message: str = "") -> Failure:
    """The cause of an attempt whose replica ``pod`` stayed Pending for ``seconds``, past the cluster's timeout.
    Worth a retry: the usual culprit (a foreign pod took the placed node's devices between two node syncs) is gone
    from the next snapshot once nodes are synced again, so the retry is placed on capacity that is really free."""
    where = f" on {node}" if node else ""
    summary = f"pod {pod} pending for {seconds:.0f} s{where}"
    detail = message or reason
    if detail:
        summary += f": {detail}"
    return Failure("unschedulable" if unschedulable else "pending_timeout", summary, None, reason)
