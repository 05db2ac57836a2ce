from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "tracking"
    verbose_name = "Experiment tracking"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.embedded import EMBEDDED_LOOPS
        from jobs import ports
        from jobs.auth import register_attempt_authentication
        from notifications.sources import register_webhook_source
        from tenancy.auth import register_other_credential
        from tenancy.panels import Panel, register_project_panel
        from tracking import alerts, demo, listeners, selectors, services  # noqa: F401  (listeners connects to the job state machine)
        from tracking.auth import RunTokenAuthentication
        from tracking.env import RUN_ENV_NAMES, run_env
        from tracking.tokens import claim_of
        from tracking.views import project_alerts_panel

        ports.register_env_source(run_env, RUN_ENV_NAMES)
        register_attempt_authentication(RunTokenAuthentication)
        # A job's run token on any other endpoint is the wrong kind of token, not a guess to count against its address.
        register_other_credential(lambda secret: claim_of(secret) is not None,
                                  "A run token only logs to its own run and reports its attempt's checkpoint; use an "
                                  "API token here.")
        register_project_panel(Panel("tracking/_project_alerts.html", project_alerts_panel, order=20))
        # The webhooks every alert of a project goes to (tracking's, budgets' and later ones) are this app's model.
        register_webhook_source(selectors.enabled_webhook_ids, selectors.enabled_webhook_target)
        # Embedded mode (no Celery beat): the hung-run check as beat runs it, and the simulated jobs' curves (only
        # here: with Celery, simulated clusters are for tests and trials, and nothing logs for them).
        EMBEDDED_LOOPS.append(("tracking-hung-runs", alerts.check_hung_runs, 60.0, None))
        EMBEDDED_LOOPS.append(("tracking-raw-retention", services.points_prune_raw, 3600.0, None))
        EMBEDDED_LOOPS.append(("tracking-demo-curves", demo.log_simulated_runs, demo.INTERVAL_SECONDS, None))
