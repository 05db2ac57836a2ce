"""Where a project's webhooks come from. The `Webhook` model is tracking's (its API and pages manage it), and
tracking sits above this app: it connects its source to `webhook_source` in its `AppConfig.ready()`. Without a
source, no project has a webhook."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from core.hooks import Hook


@dataclass(frozen=True)
class Target:
    """Where one webhook is delivered and the secret its body is signed with."""

    url: str
    secret: str


@dataclass(frozen=True)
class WebhookSource:
    """project id -> ids of its enabled webhooks; webhook id -> its target, None once it is deleted or disabled."""

    project_webhooks: Callable[[int], Iterable[int]]
    target: Callable[[int], Target | None]


webhook_source: Hook[WebhookSource] = Hook("notifications.webhook_source", single=True)


def enabled_webhooks(project_id: int) -> list[int]:
    return [pk for source in webhook_source for pk in source.project_webhooks(project_id)]


def webhook_target(webhook_id: int) -> Target | None:
    """The target of an enabled webhook, read when it is delivered (a retry sees it disabled or its URL changed)."""
    for source in webhook_source:
        found = source.target(webhook_id)
        if found is not None:
            return found
    return None
