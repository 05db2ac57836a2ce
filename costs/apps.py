from django.apps import AppConfig


class CostsConfig(AppConfig):
    name = "costs"
    verbose_name = "Usage and costs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings
        from django.utils import timezone

        from core.embedded import EMBEDDED_LOOPS, Loop
        from costs.analysis import idle as analysis_idle
        from costs.budgets import alerts, anomalies, hard_stop, scoped
        from costs.budgets.panels import budget_panel
        from costs.metering import rollup, segments
        from costs.reports import idle, tidal, usage
        from costs.reports.panels import Figure, report_figures, report_page
        from costs.reports.panels import Panel as ReportPanel
        from costs.reports.views import project_cost_panel
        from jobs import lifecycle, ports
        from pools.money import saved_source
        from tenancy.panels import Panel, project_page
        from tracking.costing import CostSource, cost_source

        # Usage segments open and close inside the transaction of every transition (after tracking's runs).
        lifecycle.on_change.connect(segments.follow_attempts)
        lifecycle.on_resize.connect(segments.follow_resizes)  # an elastic attempt's segment follows its devices
        cost_source.connect(CostSource(lambda until: usage.job_costs(until, timezone.now()),
                                       lambda: settings.TIDAL["CURRENCY"]))
        project_page.connect(Panel("costs/_project_panel.html", project_cost_panel, order=30))
        # The main report's idle guarantee is the efficiency analysis's (reports sit below analysis).
        idle.idle_sources.connect(analysis_idle.idle_guarantee)
        # The scheduler stops admitting non-preemptible jobs of projects whose hard budget is spent.
        ports.budget_sources.connect(hard_stop.spent_hard_budgets)
        # ... and of every project of an organization whose hard budget is spent; a user's spent hard budget stops
        # only that user's non-preemptible jobs.
        ports.budget_sources.connect(scoped.spent_hard_organization_budgets)
        ports.user_budget_sources.connect(scoped.spent_hard_user_budgets)
        project_page.connect(Panel("costs/_budget_panel.html", budget_panel, order=31))
        # The cost report's "Borrowed from tidal pools" (page panel and API figure), as apps above costs add theirs.
        report_page.connect(ReportPanel("costs/_tidal_panel.html", tidal.report_panel, order=10))
        report_figures.connect(Figure("tidal", tidal.report_figure))
        saved_source.connect(tidal.pool_saved)  # ... and the Pools page's money, at the same prices
        # Embedded mode (no Celery beat): closed segments are rolled into priced days and budgets checked for
        # thresholds crossed, as beat does it.
        EMBEDDED_LOOPS.connect(Loop("costs-roll-segments", rollup.roll_segments, 60.0))
        EMBEDDED_LOOPS.connect(Loop("costs-check-budgets", alerts.check_budgets, 60.0))
        EMBEDDED_LOOPS.connect(Loop("costs-check-spend-anomalies", anomalies.check_spend_anomalies, 300.0))
