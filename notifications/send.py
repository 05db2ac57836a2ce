"""What an app that alerts calls: the body or message is its own, the delivery is this app's."""

from __future__ import annotations

from collections.abc import Collection

from django.conf import settings
from django.core.mail import send_mail

from notifications.sources import enabled_webhooks
from notifications.tasks import deliver_webhook_task
from tenancy.models import Membership


def to_webhooks(project_id: int, body: str, event: str) -> None:
    """Queue one delivery of `body` (JSON) to each of the project's enabled webhooks, as an `event`."""
    for webhook_id in enabled_webhooks(project_id):
        deliver_webhook_task.delay(webhook_id, body, event)


def mail_configured() -> bool:
    """Whether a mail server is set (EMAIL_HOST): without one, alerts go to webhooks only."""
    return bool(settings.EMAIL_HOST)


def to_members(project_id: int, roles: Collection[str], subject: str, message: str) -> None:
    """E-mail the project's members of `roles` who have an address (once each); nothing when none has one."""
    recipients = sorted(set(Membership.objects.filter(project_id=project_id, role__in=list(roles))
                            .exclude(user__email="").values_list("user__email", flat=True)))
    if recipients:
        send_mail(subject=subject, message=message, from_email=None, recipient_list=recipients)
