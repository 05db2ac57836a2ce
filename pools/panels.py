"""Sections other apps add to a pool's page (the pool's services), so the page lives here without pools importing
the apps above it: each connects a panel to `pool_page` in its AppConfig.ready()."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from core.hooks import Hook
from pools.models import Pool


@dataclass(frozen=True)
class PoolPanel:
    template: str  # rendered with the page's context plus `panel`, what `context` returns
    context: Callable[[HttpRequest, Pool], dict[str, Any]]
    order: int = 100  # smaller first


pool_page: Hook[PoolPanel] = Hook("pools.panels.pool_page")


def pool_panels(request: HttpRequest, pool: Pool) -> list[tuple[str, dict[str, Any]]]:
    """(template, context) of every panel, in order."""
    return [(panel.template, panel.context(request, pool)) for panel in sorted(pool_page, key=lambda p: p.order)]
