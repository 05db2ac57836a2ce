from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Core holds no models: it is an app for its system check of the wiring between apps and `manage.py hooks`."""

    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from django.core import checks

        from core.checks import required_hooks_connected

        checks.register(required_hooks_connected)
