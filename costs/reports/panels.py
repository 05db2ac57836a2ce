"""Sections other apps add to the cost report page, and figures they add to its API answer (what failures lost,
from reliability), so the report lives here without costs importing the apps above it: each connects a panel to
`report_page` and a figure to `report_figures` in its AppConfig.ready()."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest

from core.hooks import Hook
from costs.reports.usage import ReportQuery


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


@dataclass(frozen=True)
class Figure:
    name: str  # its key in the answer's `figures`
    # value(request, the projects the report covers, its start, its end (excluded)): JSON-ready
    value: Callable[[HttpRequest, QuerySet, datetime, datetime], Any]


report_figures: Hook[Figure] = Hook("costs.reports.panels.report_figures")


def report_extras(request: HttpRequest, projects: QuerySet, start: datetime, end: datetime) -> dict[str, Any]:
    """Every figure, by name."""
    return {figure.name: figure.value(request, projects, start, end) for figure in report_figures}


def covered(projects: QuerySet, query: ReportQuery) -> tuple[QuerySet, datetime, datetime]:
    """The projects a report covers (its project and organization filters) and its range as moments, what the
    panels and figures are asked for."""
    scoped = projects.filter(**{"pk" if column == "project_id" else column: value
                                for column, value in query.filters.items()
                                if column in ("project_id", "organization_id")})
    start = datetime.combine(query.window.start, datetime.min.time(), UTC)
    end = datetime.combine(query.window.end, datetime.min.time(), UTC)
    return scoped, start, end
