"""The watch loop of one Kubernetes cluster: pod events -> the backend's observation of one attempt.

``PodWatch.handle(event)`` keeps a cache of the platform's pods (replaced on every RELIST, the Watcher's answer
to a first start or a 410 Gone) and observes the one attempt an event touches; a RELIST observes every open
attempt on the cluster. What the backend observes is recorded by `jobs.observations.record_observation`.
``run()`` drives a :class:`~clusters.kube.client.Watcher` forever, resuming from the last resourceVersion after
each watch round; API errors are logged and retried after a pause. The periodic full resync (``loops``) runs
besides, so a missed event is repaired within its interval.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from django.db import close_old_connections, connection, transaction

from clusters.backends.kubernetes import mapping
from clusters.backends.kubernetes.backend import KubernetesBackend, group_pods
from clusters.kube import names
from clusters.kube.client import Watcher, WatchEvent
from clusters.kube.dispatch import attempt_key
from clusters.kube.errors import ApiError
from core.digits import is_digits
from jobs.observations import record_all, record_observation
from jobs.selectors import open_attempts

logger = logging.getLogger(__name__)


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class PodWatch:
    def __init__(self, backend: KubernetesBackend, *, timeout_seconds: int = 60) -> None:
        self.backend = backend
        self.pods: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.watcher = Watcher(backend.client, label_selector=names.instance_selector(mapping.instance()),
                               timeout_seconds=timeout_seconds)

    def handle(self, event: WatchEvent) -> list[str]:
        """Apply one event; returns the job states the observations led to (for tests and logs)."""
        if event.type == "RELIST":
            self.pods = {_key(pod): pod for pod in event.object.get("items") or []}
            by_attempt = group_pods(self.pods.values())
            lost = self.backend.lost_nodes()
            attempts = list(open_attempts().filter(cluster=self.backend.cluster))
            seen = (self.backend.observe_attempt(a, by_attempt.get(attempt_key(a.job_id, a.number), []), lost)
                    for a in attempts)
            record_all(attempts, (observation for observation in seen if observation is not None))
            return ["relist"]
        if event.type == "DELETED":
            self.pods.pop(_key(event.object), None)
        elif event.type in ("ADDED", "MODIFIED"):
            self.pods[_key(event.object)] = event.object
        else:
            return []
        labels = (event.object.get("metadata") or {}).get("labels") or {}
        job_id, number = labels.get(names.LABEL_JOB, ""), labels.get(names.LABEL_ATTEMPT, "")
        if not is_digits(job_id) or not is_digits(number):
            return []
        attempt = open_attempts().filter(cluster=self.backend.cluster, job_id=int(job_id), number=int(number)).first()
        if attempt is None:
            return []
        pods = group_pods(self.pods.values()).get(attempt_key(job_id, int(number)), [])
        observation = self.backend.observe_attempt(attempt, pods, self.backend.lost_nodes())
        if observation is None:
            return [attempt.job.state]
        with transaction.atomic():
            return [record_observation(attempt, observation) or attempt.job.state]

    def run(self, stop: threading.Event, *, rounds: int | None = None, pause: float = 5.0) -> None:
        done = 0
        while not stop.is_set() and (rounds is None or done < rounds):
            done += 1
            try:
                for event in self.watcher.events(rounds=1):
                    self.handle(event)
                    if stop.is_set():
                        return
            except ApiError as exc:
                logger.warning("watch of %s failed (%s); retrying in %.0fs", self.backend.cluster.name, exc, pause)
                stop.wait(pause)
            except Exception:
                logger.exception("watch loop of %s failed; retrying in %.0fs", self.backend.cluster.name, pause)
                stop.wait(pause)
            finally:
                # A long-lived loop must drop broken or expired connections between rounds; inside an outer
                # transaction (a test's) closing would break it, and nothing there expires.
                if not connection.in_atomic_block:
                    close_old_connections()
