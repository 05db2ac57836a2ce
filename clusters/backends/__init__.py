"""The backend interface: how admitted jobs reach a cluster and how their status comes back.

The scheduler loop and the job services call only `dispatch_job` and `stop_job`; each queues a Celery task (run
in-process in embedded mode) that loads the job and calls the backend of the job's cluster.
"""

from __future__ import annotations

from typing import Protocol

from clusters.models import Cluster


class Backend(Protocol):
    def dispatch(self, job_id: int) -> None:
        """Create the job's workload for its current attempt. Must be idempotent."""

    def stop(self, job_id: int, attempt: int, reason: str) -> None:
        """Delete the workload of that attempt (with a grace period)."""

    def tick(self) -> None:
        """Periodic status reconcile."""


def backend_for(cluster: Cluster) -> Backend:
    if cluster.backend == Cluster.Backend.SIMULATED:
        from clusters.backends.simulated import SimulatedBackend

        return SimulatedBackend()
    from clusters.backends.kubernetes import KubernetesBackend

    return KubernetesBackend(cluster)


def dispatch_job(job_id: int) -> None:
    from clusters.tasks import dispatch_job_task

    dispatch_job_task.delay(job_id)


def stop_job(job_id: int, *, reason: str, attempt: int | None = None) -> None:
    from clusters.tasks import stop_job_task

    stop_job_task.delay(job_id, reason, attempt)
