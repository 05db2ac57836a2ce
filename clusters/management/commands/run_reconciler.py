"""`manage.py run_reconciler`: one pod watch per Kubernetes cluster (a docker-compose service in production).

SIGTERM or SIGINT stops it within a couple of seconds: every watch is closed, which shuts down the connection of a
round blocked on a silent stream instead of waiting for the round's timeout (up to ``--timeout`` + 5 s).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.management.base import BaseCommand

from clusters import selectors
from clusters.backends.kubernetes.backend import KubernetesBackend
from clusters.backends.kubernetes.watch import PodWatch

# How long a stopping watch thread may take once its stream is cut: the list or reconcile it may be in the middle of.
STOP_GRACE_SECONDS = 10.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set ``stop`` while inside; the previous handlers come back afterwards (a caller such as
    ``call_command`` keeps its own)."""
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Command(BaseCommand):
    help = ("Watch the platform's pods on every Kubernetes cluster and reconcile job status. Run one per "
            "installation; the periodic resync task repairs anything a watch missed.")

    def add_arguments(self, parser):
        parser.add_argument("--cluster", action="append", default=[], help="only these clusters (repeatable)")
        parser.add_argument("--timeout", type=int, default=60, help="seconds per watch round")

    def handle(self, *args, cluster, timeout, **options):
        clusters = [c for c in selectors.kubernetes_clusters() if not cluster or c.name in cluster]
        if not clusters:
            self.stdout.write("no Kubernetes clusters to watch")
            return
        stop = threading.Event()
        watches = [PodWatch(KubernetesBackend(item), timeout_seconds=timeout) for item in clusters]
        with stop_on_signals(stop):
            threads = [self._start(watch, stop) for watch in watches]
            while not stop.wait(1.0):  # wakes for the signal handler, which runs in this (the main) thread
                pass
            for watch in watches:
                watch.watcher.close()  # ends a round blocked on its stream now
            for thread in threads:
                thread.join(STOP_GRACE_SECONDS)
        lingering = [thread.name for thread in threads if thread.is_alive()]
        if lingering:
            self.stderr.write(f"stopped; still running after {STOP_GRACE_SECONDS:.0f}s: {', '.join(lingering)}")
        else:
            self.stdout.write("stopped")

    def _start(self, watch: PodWatch, stop: threading.Event) -> threading.Thread:
        name = watch.backend.cluster.name
        thread = threading.Thread(target=watch.run, args=(stop,), name=f"watch-{name}", daemon=True)
        thread.start()
        self.stdout.write(f"watching pods on {name}")
        return thread
