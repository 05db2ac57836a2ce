"""Alert notifications as tasks: what an alert's webhooks and e-mail say, sent through the notifications app
(webhooks signed and retried with backoff, e-mail to project owners). In embedded mode and tests they run
in-process."""

from __future__ import annotations

import json

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from notifications import send
from tenancy.models import Role
from tracking.models import Alert


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
    send.to_webhooks(alert.run.project_id, alert_body(alert, event).decode(), event)
    if send.mail_configured():
        mail_alert_task.delay(alert_id, event)


@shared_task
def mail_alert_task(alert_id: int, event: str) -> None:
    alert = Alert.objects.filter(pk=alert_id).select_related("run__project").first()
    if alert is None:
        return
    verb = "resolved" if event == "alert.resolved" else "opened"
    send.to_members(alert.run.project_id, [Role.OWNER],
                    subject=f"[Tidal] {alert.rule} {verb} on run {alert.run.name} ({alert.run.project.slug})",
                    message=f"{alert.message}\n\nRun: {settings.TIDAL['URL']}/api/v1/runs/{alert.run_id}/\n")
