from django.apps import AppConfig


class MlplatformConfig(AppConfig):
    """The project package is an app too, for its management commands (seed_demo, run_embedded)."""

    name = "mlplatform"
    verbose_name = "Tidal platform"
