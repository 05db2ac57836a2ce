from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_delete, post_save


class TenancyConfig(AppConfig):
    name = "tenancy"
    verbose_name = "Tenancy"

    def ready(self) -> None:
        from tenancy import authcache, permissions
        from tenancy.models import ApiToken, Membership, Project

        # Whatever can change who a token is or what a user may do in a project forgets the cached answers.
        for model in (ApiToken, Membership, Project, settings.AUTH_USER_MODEL):
            post_save.connect(authcache.invalidate, sender=model, dispatch_uid=f"authcache-save-{model}")
            post_delete.connect(authcache.invalidate, sender=model, dispatch_uid=f"authcache-delete-{model}")
        # A membership changed during a request: that request no longer trusts the role it remembered.
        post_save.connect(permissions.forget_role, sender=Membership, dispatch_uid="request-roles-save")
        post_delete.connect(permissions.forget_role, sender=Membership, dispatch_uid="request-roles-delete")
