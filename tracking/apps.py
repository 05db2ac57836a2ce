from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "tracking"
    verbose_name = "Experiment tracking"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobs import ports
        from tracking import listeners  # noqa: F401  (connects to the job state machine)
        from tracking.env import run_env

        ports.register_env_source(run_env)
