"""Sections other apps add to the job page (the failure diagnoses today), so the page lives here without jobs
importing the apps above it: each connects a panel to `job_page` in its AppConfig.ready()."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from core.hooks import Hook
from jobs.models import Job


@dataclass(frozen=True)
class Panel:
    template: str  # rendered with the page's context plus `panel`, what `context` returns
    context: Callable[[HttpRequest, Job], dict[str, Any]]
    order: int = 100  # smaller first


job_page: Hook[Panel] = Hook("jobs.panels.job_page")


def job_panels(request: HttpRequest, job: Job) -> list[tuple[str, dict[str, Any]]]:
    """(template, context) of every panel, in order."""
    return [(panel.template, panel.context(request, job)) for panel in sorted(job_page, key=lambda p: p.order)]
