from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class TrackingConfig(AppConfig):
    name = "tracking"
    verbose_name = "Experiment tracking"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.embedded import EMBEDDED_LOOPS, Loop
        from jobs import lifecycle, ports
        from jobs.auth import attempt_authentications
        from notifications.sources import WebhookSource, webhook_source
        from tenancy.auth import OtherCredential, other_credentials
        from tenancy.models import Project
        from tenancy.panels import Panel, project_page
        from tracking import alerts, demo, listeners, selectors, services
        from tracking.artifacts import services as artifact_services
        from tracking.auth import RunTokenAuthentication
        from tracking.env import RUN_ENV_NAMES, run_env
        from tracking.models import AlertRule, Run
        from tracking.tokens import claim_of
        from tracking.views import project_alerts_panel

        # Runs follow jobs inside the transaction of every transition (before costs' segments: INSTALLED_APPS order).
        lifecycle.on_change.connect(listeners.follow_jobs)
        post_save.connect(listeners.default_experiment, sender=Project, dispatch_uid="tracking-default-experiment")
        post_delete.connect(listeners.forget_artifacts, sender=Run, dispatch_uid="tracking-forget-artifacts")
        post_save.connect(alerts.forget_rules, sender=AlertRule, dispatch_uid="tracking-forget-rules-save")
        post_delete.connect(alerts.forget_rules, sender=AlertRule, dispatch_uid="tracking-forget-rules-delete")
        ports.env_sources.connect(ports.EnvSource(run_env, RUN_ENV_NAMES))
        attempt_authentications.connect(RunTokenAuthentication)
        # A job's run token on any other endpoint is the wrong kind of token, not a guess to count against its address.
        other_credentials.connect(OtherCredential(lambda secret: claim_of(secret) is not None,
                                                  "A run token only logs to its own run and reports its attempt's "
                                                  "checkpoint; use an API token here."))
        project_page.connect(Panel("tracking/_project_alerts.html", project_alerts_panel, order=20))
        # The webhooks every alert of a project goes to (tracking's, budgets' and later ones) are this app's model.
        webhook_source.connect(WebhookSource(selectors.enabled_webhook_ids, selectors.enabled_webhook_target))
        # Embedded mode (no Celery beat): the hung-run check as beat runs it, and the simulated jobs' curves (only
        # here: with Celery, simulated clusters are for tests and trials, and nothing logs for them).
        EMBEDDED_LOOPS.connect(Loop("tracking-hung-runs", alerts.check_hung_runs, 60.0))
        EMBEDDED_LOOPS.connect(Loop("tracking-raw-retention", services.points_prune_raw, 3600.0))
        EMBEDDED_LOOPS.connect(Loop("tracking-artifact-uploads", artifact_services.uploads_sweep, 3600.0))
        EMBEDDED_LOOPS.connect(Loop("tracking-demo-curves", demo.log_simulated_runs, demo.INTERVAL_SECONDS))
