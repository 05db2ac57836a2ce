"""The simulated backend: a fake cluster for `make run`, demos and tests.

Admitted jobs start TIDAL_SIM_START_DELAY seconds after dispatch and succeed after their declared `duration`.
Failure injection, for trying recovery by hand:
- a job label `sim.tidal.dev/fail-after: "<seconds>"` fails its first attempt that long after it starts
  (`sim.tidal.dev/fail-cause` picks the cause: user_error by default, or e.g. cuda_oom, nccl, node_lost);
- a node marked not ready (admin console or API) fails every attempt running on it, which retries elsewhere.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster, Node
from core.errors import InvalidTransition
from jobs import services
from jobs.models import Job
from jobs.states import State

logger = logging.getLogger(__name__)

FAIL_AFTER_LABEL = "sim.tidal.dev/fail-after"
FAIL_CAUSE_LABEL = "sim.tidal.dev/fail-cause"
RETRYABLE_CAUSES = {"cuda_oom": False, "user_error": False, "image_pull": False, "invalid_spec": False}


def _simulated(jobs):
    """Only jobs on simulated clusters: the Kubernetes backend reconciles its own."""
    return jobs.filter(cluster__backend=Cluster.Backend.SIMULATED)


class SimulatedBackend:
    def dispatch(self, job_id: int) -> None:
        job = Job.objects.filter(pk=job_id).first()
        if job is None or job.state != State.ADMITTED:
            return
        with transaction.atomic():
            services.job_claim_for_dispatch(job)

    def stop(self, job_id: int, attempt: int, reason: str) -> None:
        # Nothing runs for real: the state change already released the simulated devices.
        logger.info("simulated stop of job %s attempt %s (%s)", job_id, attempt, reason)

    def tick(self) -> None:
        now = timezone.now()
        with transaction.atomic():
            self._start_dispatched(now)
            self._fail_jobs_on_lost_nodes()
            self._finish_or_fail_running(now)
            services.job_requeue_due_retries()

    def _start_dispatched(self, now) -> None:
        delay = timedelta(seconds=settings.TIDAL["SIM_START_DELAY"])
        for job in _simulated(Job.objects.filter(state=State.DISPATCHING, admitted_at__lte=now - delay)):
            self._guarded(services.job_mark_running, job, reason="all replicas running (simulated)")

    def _fail_jobs_on_lost_nodes(self) -> None:
        lost = {(n.cluster_id, n.name) for n in Node.objects.filter(
            ready=False, cluster__backend=Cluster.Backend.SIMULATED).only("cluster_id", "name")}
        if not lost:
            return
        holding = Job.objects.filter(state__in=[State.DISPATCHING, State.RUNNING])
        for job in _simulated(holding).select_related("cluster"):
            gone = sorted({a["node"] for a in job.placement if (job.cluster_id, a["node"]) in lost})
            if gone:
                self._guarded(services.job_attempt_failed, job, cause="node_lost",
                              reason=f"node {gone[0]} became NotReady", retryable=True,
                              lost_node=f"{job.cluster.name}/{gone[0]}")

    def _finish_or_fail_running(self, now) -> None:
        for job in _simulated(Job.objects.filter(state=State.RUNNING)):
            ran = (now - job.started_at).total_seconds()
            fail_after = _label_seconds(job, FAIL_AFTER_LABEL)
            if fail_after is not None and job.attempt == 1 and ran >= fail_after:
                cause = job.labels.get(FAIL_CAUSE_LABEL, "user_error")
                self._guarded(services.job_attempt_failed, job, cause=cause, reason="injected failure (simulated)",
                              retryable=RETRYABLE_CAUSES.get(cause, True))
            elif job.max_runtime and ran >= job.max_runtime:
                self._guarded(services.job_attempt_failed, job, cause="max_runtime",
                              reason=f"exceeded its max runtime of {job.max_runtime}s", retryable=False)
            elif job.duration is not None and ran >= job.duration:
                self._guarded(services.job_mark_succeeded, job, reason="completed (simulated)")

    @staticmethod
    def _guarded(action, job: Job, **kwargs) -> None:
        """A job cancelled or preempted between our read and our write is simply skipped."""
        try:
            with transaction.atomic():
                action(job, **kwargs)
        except InvalidTransition:
            pass


def _label_seconds(job: Job, label: str) -> float | None:
    try:
        return float(job.labels[label])
    except (KeyError, TypeError, ValueError):
        return None
