from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "Tidal pools"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobs import ports
        from jobs.panels import Panel, job_page
        from pools import services, source, views
        from tenancy.auth import OtherCredential, other_credentials

        ports.pool_source.connect(ports.PoolSource(source.read, source.record))
        # A pool token used as a personal token is the wrong kind of token, not a guess.
        other_credentials.connect(OtherCredential(
            lambda secret: secret.startswith(services.TOKEN_PREFIX) and services.pool_for_token(secret) is not None,
            "This is a pool token: it only puts its pool's demand (PUT /api/v1/pools/<name>/demand/)."))
        job_page.connect(Panel("pools/_job_lent.html", views.job_panel, order=10))
