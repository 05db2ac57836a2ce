from django.apps import AppConfig


class ReliabilityConfig(AppConfig):
    name = "reliability"
    verbose_name = "Reliability"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        from core.embedded import EMBEDDED_LOOPS, Loop
        from costs.reports.panels import Figure as CostFigure
        from costs.reports.panels import Panel as CostPanel
        from costs.reports.panels import report_figures, report_page
        from jobs import lifecycle, observations
        from jobs.panels import Panel, job_page
        from reliability import hangs, services, views

        # A failing attempt's cause is diagnosed from all its evidence before the state machine decides its retry;
        # every attempt that ended other than succeeded gets its diagnosis in the transaction that ended it.
        observations.failure_diagnosis.connect(services.verdict)
        lifecycle.on_change.connect(services.follow_attempts)
        job_page.connect(Panel("reliability/_job_diagnoses.html", views.job_panel, order=20))
        report_page.connect(CostPanel("reliability/_cost_panel.html", views.cost_panel, order=20))
        report_figures.connect(CostFigure("lost_to_failures", views.cost_figure))
        # Embedded mode (no Celery beat): hang detection as beat runs it.
        EMBEDDED_LOOPS.connect(Loop("reliability-hangs", hangs.check_hangs, settings.TIDAL["HANG_CHECK_INTERVAL"]))
