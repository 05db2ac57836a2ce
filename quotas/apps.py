from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "quotas"

    def ready(self) -> None:
        from quotas.views import quota_panel
        from tenancy.panels import Panel, project_page

        project_page.connect(Panel("quotas/_project_panel.html", quota_panel, order=10))
