"""Where a project's webhooks come from. The `Webhook` model is tracking's (its API and pages manage it), and
tracking sits above this app: it fills this registration point in its `AppConfig.ready()`, as apps fill
`tenancy.panels`. Without a source, no project has a webhook."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """Where one webhook is delivered and the secret its body is signed with."""

    url: str
    secret: str


# project id -> ids of its enabled webhooks; webhook id -> its target, None once it is deleted or disabled
ProjectWebhooks = Callable[[int], Iterable[int]]
WebhookTarget = Callable[[int], Target | None]
_sources: list[tuple[ProjectWebhooks, WebhookTarget]] = []


def register_webhook_source(project_webhooks: ProjectWebhooks, target: WebhookTarget) -> None:
    _sources[:] = [(project_webhooks, target)]


def enabled_webhooks(project_id: int) -> list[int]:
    return [pk for project_webhooks, _ in _sources for pk in project_webhooks(project_id)]


def webhook_target(webhook_id: int) -> Target | None:
    """The target of an enabled webhook, read when it is delivered (a retry sees it disabled or its URL changed)."""
    for _, target in _sources:
        found = target(webhook_id)
        if found is not None:
            return found
    return None
