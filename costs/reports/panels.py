"""Sections other apps add to the cost report page (what failures lost, from reliability), so the page lives here
without costs importing the apps above it: each connects a panel to `report_page` in its AppConfig.ready()."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest

from core.hooks import Hook


@dataclass(frozen=True)
class Panel:
    template: str  # rendered with the page's context plus `panel`, what `context` returns
    # context(request, the projects the report covers, its start, its end (excluded))
    context: Callable[[HttpRequest, QuerySet, datetime, datetime], dict[str, Any]]
    order: int = 100  # smaller first


report_page: Hook[Panel] = Hook("costs.reports.panels.report_page")


def report_panels(request: HttpRequest, projects: QuerySet, start: datetime,
                  end: datetime) -> list[tuple[str, dict[str, Any]]]:
    """(template, context) of every panel, in order."""
    return [(panel.template, panel.context(request, projects, start, end))
            for panel in sorted(report_page, key=lambda p: p.order)]
