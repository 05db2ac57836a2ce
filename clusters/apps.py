from django.apps import AppConfig
from django.conf import settings


class ClustersConfig(AppConfig):
    name = "clusters"

    def ready(self) -> None:
        from clusters import services
        from clusters.backends.simulated import SimulatedBackend
        from core.embedded import EMBEDDED_LOOPS

        EMBEDDED_LOOPS.append(("simulated-cluster", SimulatedBackend().tick, 1.0, None))
        # Kubernetes clusters in embedded mode (no Celery beat); each is a no-op without such clusters.
        tidal = settings.TIDAL
        EMBEDDED_LOOPS.append(("kube-resync", services.kube_resync_all, min(tidal["KUBE_RESYNC_INTERVAL"], 10.0), None))
        EMBEDDED_LOOPS.append(("kube-node-sync", services.kube_sync_nodes_all, tidal["KUBE_NODE_SYNC_INTERVAL"], None))
        EMBEDDED_LOOPS.append(("kube-orphan-sweep", services.kube_sweep_all, tidal["KUBE_SWEEP_INTERVAL"], None))
