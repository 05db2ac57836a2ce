from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "telemetry"
    verbose_name = "GPU telemetry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.embedded import EMBEDDED_LOOPS, Loop
        from telemetry import ingest, simulated

        # Embedded mode (no Celery beat): the reader as beat runs it (a no-op without TIDAL_PROMETHEUS_URL), and the
        # simulated clusters' GPUs, so `make run` shows telemetry with no Prometheus.
        EMBEDDED_LOOPS.connect(Loop("telemetry-read", ingest.read_all, ingest.interval()))
        EMBEDDED_LOOPS.connect(Loop("telemetry-simulated", simulated.tick, simulated.INTERVAL_SECONDS))
