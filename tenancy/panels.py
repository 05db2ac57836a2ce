"""Sections other apps add to the project page (quota usage today), so the page lives here without tenancy importing
the apps above it: each connects a panel to `project_page` at start-up, in its AppConfig.ready()."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from core.hooks import Hook
from tenancy.models import Project


@dataclass(frozen=True)
class Panel:
    template: str  # rendered with the page's context plus what `context` returns
    context: Callable[[HttpRequest, Project], dict[str, Any]]
    order: int = 100  # smaller first


project_page: Hook[Panel] = Hook("tenancy.panels.project_page")


def project_panels(request: HttpRequest, project: Project) -> list[tuple[str, dict[str, Any]]]:
    """(template, context) of every panel, in order."""
    return [(panel.template, panel.context(request, project)) for panel in sorted(project_page, key=lambda p: p.order)]
