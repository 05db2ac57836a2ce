from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "clusters"

    def ready(self) -> None:
        from clusters.backends.simulated import SimulatedBackend
        from mlplatform.embedded import EMBEDDED_LOOPS

        EMBEDDED_LOOPS.append(("simulated-cluster", SimulatedBackend().tick, 1.0, None))
