from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "quotas"

    def ready(self) -> None:
        from quotas.views import quota_panel
        from tenancy.panels import Panel, register_project_panel

        register_project_panel(Panel("quotas/_project_panel.html", quota_panel, order=10))
