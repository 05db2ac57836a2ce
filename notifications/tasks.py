"""The delivery of one webhook as a task, retried with exponential backoff. In embedded mode and tests it runs
in-process."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import Retry

from notifications import webhooks
from notifications.sources import webhook_target

logger = logging.getLogger(__name__)

MAX_RETRIES = 5
BACKOFF_SECONDS = 10  # doubled at each retry: 10 s, 20 s, 40 s, 80 s, 160 s


# Named as it was when it lived in tracking.notifications: deliveries already queued (and their retries) name it so.
@shared_task(bind=True, max_retries=MAX_RETRIES, name="tracking.notifications.deliver_webhook_task")
def deliver_webhook_task(self, webhook_id: int, body: str, event: str) -> Retry | None:
    """POST one body to one webhook; a failure worth retrying is retried with exponential backoff."""
    target = webhook_target(webhook_id)
    if target is None:
        return None
    try:
        webhooks.deliver(target.url, target.secret, body.encode(), event)
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
