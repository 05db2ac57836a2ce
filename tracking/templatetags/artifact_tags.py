"""The run page's artifact list (tracking.artifacts.views.panel), as a tag, so the run page's view stays as it is."""

from __future__ import annotations

from django import template

from tracking.artifacts import views
from tracking.models import Run

register = template.Library()


@register.inclusion_tag("tracking/_run_artifacts.html")
def run_artifacts(run: Run) -> dict:
    return {"run": run, "panel": views.panel(run)}
