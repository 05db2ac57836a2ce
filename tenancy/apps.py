from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_delete, post_save


class TenancyConfig(AppConfig):
    name = "tenancy"
    verbose_name = "Tenancy"

    def ready(self) -> None:
        from tenancy import authcache
        from tenancy.models import ApiToken, Membership, Project

        # Whatever can change who a token is or what a user may do in a project forgets the cached answers.
        for model in (ApiToken, Membership, Project, settings.AUTH_USER_MODEL):
            post_save.connect(authcache.invalidate, sender=model, dispatch_uid=f"authcache-save-{model}")
            post_delete.connect(authcache.invalidate, sender=model, dispatch_uid=f"authcache-delete-{model}")
