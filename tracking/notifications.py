"""Alert notifications as tasks: webhooks (signed, retried with backoff) and e-mail to project owners. In embedded
mode and tests they run in-process."""

from __future__ import annotations

import json
import logging

from celery import shared_task
from celery.exceptions import Retry
from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from tenancy.models import Membership, Role
from tracking import webhooks
from tracking.models import Alert, Webhook

logger = logging.getLogger(__name__)

MAX_RETRIES = 5
BACKOFF_SECONDS = 10  # doubled at each retry: 10 s, 20 s, 40 s, 80 s, 160 s


def alert_body(alert: Alert, event: str) -> bytes:
    """What a webhook receives (documented in docs/alerts.md); the value is null when it was NaN or infinite."""
    run = alert.run
    value = alert.value
    payload = {
        "event": event,
        "sent_at": timezone.now().isoformat(),
        "project": run.project.slug,
        "run": {"id": run.pk, "name": run.name, "job": run.job_id,
                "url": f"{settings.TIDAL['URL']}/api/v1/runs/{run.pk}/"},
        "alert": {"id": alert.pk, "rule": alert.rule, "key": alert.key, "step": alert.step, "value": value,
                  "message": alert.message, "opened_at": alert.opened_at.isoformat(),
                  "resolved_at": alert.resolved_at.isoformat() if alert.resolved_at else None,
                  "resolution": alert.resolution or None, "resolved_by": alert.resolved_by or None},
    }
    return json.dumps(payload, separators=(",", ":")).encode()


@shared_task
def notify_alert_task(alert_id: int, event: str) -> None:
    """Fan an alert's opening or resolution out to the project's webhooks and, with a mail server, its owners."""
    alert = Alert.objects.filter(pk=alert_id).select_related("run__project").first()
    if alert is None:
        return
    body = alert_body(alert, event).decode()
    for webhook_id in Webhook.objects.filter(project_id=alert.run.project_id, enabled=True).values_list("pk",
                                                                                                        flat=True):
        deliver_webhook_task.delay(webhook_id, body, event)
    if settings.EMAIL_HOST:
        mail_alert_task.delay(alert_id, event)


@shared_task(bind=True, max_retries=MAX_RETRIES)
def deliver_webhook_task(self, webhook_id: int, body: str, event: str) -> Retry | None:
    """POST one alert body to one webhook; a failure worth retrying is retried with exponential backoff."""
    webhook = Webhook.objects.filter(pk=webhook_id, enabled=True).first()
    if webhook is None:
        return None
    try:
        webhooks.deliver(webhook.url, webhook.secret, body.encode(), event)
    except webhooks.Refused as e:
        logger.warning("webhook %s not delivered: %s", webhook_id, e)
    except webhooks.DeliveryFailed as e:
        if self.request.retries >= MAX_RETRIES:
            logger.warning("webhook %s given up after %s retries: %s", webhook_id, MAX_RETRIES, e)
            return None
        countdown = BACKOFF_SECONDS * 2 ** self.request.retries
        if self.request.is_eager:  # embedded mode, tests: returned, Celery runs the retry at once (no countdown);
            return self.retry(countdown=countdown, throw=False)  # raised, it would escape to the caller
        raise self.retry(countdown=countdown) from e
    return None


@shared_task
def mail_alert_task(alert_id: int, event: str) -> None:
    alert = Alert.objects.filter(pk=alert_id).select_related("run__project").first()
    if alert is None:
        return
    project = alert.run.project
    recipients = sorted(set(Membership.objects.filter(project=project, role=Role.OWNER)
                            .exclude(user__email="").values_list("user__email", flat=True)))
    if not recipients:
        return
    verb = "resolved" if event == "alert.resolved" else "opened"
    send_mail(subject=f"[Tidal] {alert.rule} {verb} on run {alert.run.name} ({project.slug})",
              message=f"{alert.message}\n\nRun: {settings.TIDAL['URL']}/api/v1/runs/{alert.run_id}/\n",
              from_email=None, recipient_list=recipients)
