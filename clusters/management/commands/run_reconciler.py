"""`manage.py run_reconciler`: one pod watch per Kubernetes cluster (a docker-compose service in production)."""

import signal
import threading

from django.core.management.base import BaseCommand

from clusters import selectors
from clusters.backends.kubernetes import KubernetesBackend
from clusters.reconciler import PodWatch


class Command(BaseCommand):
    help = ("Watch the platform's pods on every Kubernetes cluster and reconcile job status. Run one per "
            "installation; the periodic resync task repairs anything a watch missed.")

    def add_arguments(self, parser):
        parser.add_argument("--cluster", action="append", default=[], help="only these clusters (repeatable)")
        parser.add_argument("--timeout", type=int, default=60, help="seconds per watch round")

    def handle(self, *args, cluster, timeout, **options):
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        clusters = [c for c in selectors.kubernetes_clusters() if not cluster or c.name in cluster]
        if not clusters:
            self.stdout.write("no Kubernetes clusters to watch")
            return
        threads = []
        for item in clusters:
            watch = PodWatch(KubernetesBackend(item), timeout_seconds=timeout)
            thread = threading.Thread(target=watch.run, args=(stop,), name=f"watch-{item.name}", daemon=True)
            thread.start()
            threads.append(thread)
            self.stdout.write(f"watching pods on {item.name}")
        while not stop.wait(1.0):
            pass
        for thread in threads:
            thread.join(timeout + 10)
