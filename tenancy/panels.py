"""Sections other apps add to the project page (quota usage today), so the page lives here without tenancy importing
the apps above it: each registers a panel at start-up, in its AppConfig.ready()."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from tenancy.models import Project


@dataclass(frozen=True)
class Panel:
    template: str  # rendered with the page's context plus what `context` returns
    context: Callable[[HttpRequest, Project], dict[str, Any]]
    order: int = 100  # smaller first


PROJECT_PANELS: list[Panel] = []


def register_project_panel(panel: Panel) -> None:
    PROJECT_PANELS.append(panel)
    PROJECT_PANELS.sort(key=lambda p: p.order)


def project_panels(request: HttpRequest, project: Project) -> list[tuple[str, dict[str, Any]]]:
    """(template, context) of every panel, in order."""
    return [(panel.template, panel.context(request, project)) for panel in PROJECT_PANELS]
