"""Why attempts fail, and which failures are worth a retry: one table for every backend.

Backends classify what they saw into one of these causes (the Kubernetes backend from container reasons, exit codes
and log lines; the simulated one from its injected failures); whether the attempt is retried is decided here, from
the cause and the job's own `permanent_exit_codes`, never by a backend.

| cause           | retried | what happened                                                              |
|-----------------|---------|----------------------------------------------------------------------------|
| image_pull      | no      | the image could not be pulled                                              |
| invalid_spec    | no      | the cluster refused the workload, or its container could not be created    |
| max_runtime     | no      | it ran past the job's declared max runtime                                  |
| node_lost       | yes     | a node under it went away or became NotReady (the retry avoids the node)  |
| preempted       | yes     | the cluster itself evicted or preempted a replica                          |
| cuda_oom        | yes     | an accelerator ran out of memory                                           |
| host_oom        | yes     | a replica exceeded its memory                                              |
| nccl            | yes     | collective communication failed or timed out                               |
| user_error      | yes     | the training process raised or exited non-zero                             |
| unschedulable   | yes     | a replica could not be bound to its node in time                           |
| pending_timeout | yes     | a replica was bound but its container never started in time               |
| unknown         | yes     | anything else, e.g. the replicas' pods vanished                            |

Retries are bounded by the job's `retry_limit`; an exit code the job marks permanent is never retried.
"""

from __future__ import annotations

from collections.abc import Iterable

NOT_RETRIED = frozenset({"image_pull", "invalid_spec", "max_runtime"})
CAUSES = ("image_pull", "invalid_spec", "max_runtime", "node_lost", "preempted", "cuda_oom", "host_oom", "nccl",
          "user_error", "unschedulable", "pending_timeout", "unknown")
NODE_LOST = "node_lost"
UNKNOWN = "unknown"


def is_retryable(cause: str, exit_code: int | None = None, permanent_exit_codes: Iterable[int] = ()) -> bool:
    """Whether an attempt that failed this way may be retried (within the job's retry limit)."""
    if exit_code is not None and exit_code in set(permanent_exit_codes):
        return False
    return cause not in NOT_RETRIED
