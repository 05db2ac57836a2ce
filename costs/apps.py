from django.apps import AppConfig


class CostsConfig(AppConfig):
    name = "costs"
    verbose_name = "Usage and costs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings
        from django.utils import timezone

        from core.embedded import EMBEDDED_LOOPS
        from costs.budgets import alerts, hard_stop
        from costs.budgets.panels import budget_panel
        from costs.metering import rollup, segments  # noqa: F401  (segments connects to the job state machine)
        from costs.reports import usage
        from costs.reports.views import project_cost_panel
        from jobs import ports
        from tenancy.panels import Panel, register_project_panel
        from tracking.costing import register_cost_source

        register_cost_source(lambda until: usage.job_costs(until, timezone.now()),
                             lambda: settings.TIDAL["CURRENCY"])
        register_project_panel(Panel("costs/_project_panel.html", project_cost_panel, order=30))
        # The scheduler stops admitting non-preemptible jobs of projects whose hard budget is spent.
        ports.register_budget_source(hard_stop.spent_hard_budgets)
        register_project_panel(Panel("costs/_budget_panel.html", budget_panel, order=31))
        # Embedded mode (no Celery beat): closed segments are rolled into priced days and budgets checked for
        # thresholds crossed, as beat does it.
        EMBEDDED_LOOPS.append(("costs-roll-segments", rollup.roll_segments, 60.0, None))
        EMBEDDED_LOOPS.append(("costs-check-budgets", alerts.check_budgets, 60.0, None))
