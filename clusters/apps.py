from django.apps import AppConfig
from django.conf import settings


class ClustersConfig(AppConfig):
    name = "clusters"

    def ready(self) -> None:
        from clusters import backends, tasks
        from clusters.backends.kubernetes import loops
        from clusters.kube.envvars import is_reserved
        from core.embedded import EMBEDDED_LOOPS, Loop
        from jobs import ports

        # The clusters' side of the dispatch port: jobs reaches its backends, tasks and inventory only through it.
        ports.clusters.connect(ports.Clusters(backend_for=backends.backend_for_attempt,
                                              queue_dispatch=tasks.queue_dispatch, queue_stop=tasks.queue_stop,
                                              inventory=backends.inventory, is_reserved_env=is_reserved,
                                              queue_resize=tasks.queue_resize, queue_cordon=tasks.queue_cordon))
        # Embedded mode (no Celery beat): the same loops in-process; each is a no-op without such clusters.
        tidal = settings.TIDAL
        EMBEDDED_LOOPS.connect(Loop("simulated-cluster", backends.observe_simulated, 1.0))
        EMBEDDED_LOOPS.connect(Loop("kube-resync", loops.kube_resync_all, min(tidal["KUBE_RESYNC_INTERVAL"], 10.0)))
        EMBEDDED_LOOPS.connect(Loop("kube-node-sync", loops.kube_sync_nodes_all, tidal["KUBE_NODE_SYNC_INTERVAL"]))
        EMBEDDED_LOOPS.connect(Loop("kube-orphan-sweep", loops.kube_sweep_all, tidal["KUBE_SWEEP_INTERVAL"]))
