"""What an app that alerts calls: the body or message is its own, the delivery is this app's."""

from __future__ import annotations

from collections.abc import Collection

from django.conf import settings
from django.core.mail import send_mail

from notifications.sources import enabled_webhooks
from notifications.tasks import deliver_webhook_task
from tenancy.models import Membership, Project


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


def to_organization_members(organization_id: int, roles: Collection[str], subject: str, message: str) -> None:
    """E-mail the members of `roles` of any project of the organization (once each)."""
    recipients = sorted(set(Membership.objects.filter(project__in=Project.objects.filter(
        organization_id=organization_id).values("id"), role__in=list(roles))
        .exclude(user__email="").values_list("user__email", flat=True)))
    if recipients:
        send_mail(subject=subject, message=message, from_email=None, recipient_list=recipients)


def to_user(user_id: int, subject: str, message: str) -> None:
    """E-mail one user, when they have an address."""
    from django.contrib.auth import get_user_model

    email = get_user_model().objects.filter(pk=user_id).exclude(email="").values_list("email", flat=True).first()
    if email:
        send_mail(subject=subject, message=message, from_email=None, recipient_list=[email])
