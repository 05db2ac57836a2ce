from django.apps import AppConfig


class CostsConfig(AppConfig):
    name = "costs"
    verbose_name = "Usage and costs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings
        from django.utils import timezone

        from core.embedded import EMBEDDED_LOOPS
        from costs import reports, rollup, segments  # noqa: F401  (segments connects to the job state machine)
        from costs.views import project_cost_panel
        from tenancy.panels import Panel, register_project_panel
        from tracking.costing import register_cost_source

        register_cost_source(lambda until: reports.job_costs(until, timezone.now()),
                             lambda: settings.TIDAL["CURRENCY"])
        register_project_panel(Panel("costs/_project_panel.html", project_cost_panel, order=30))

        # Embedded mode (no Celery beat): closed segments are rolled into priced days as beat does it.
        EMBEDDED_LOOPS.append(("costs-roll-segments", rollup.roll_segments, 60.0, None))
