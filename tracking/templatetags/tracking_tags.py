"""Template tags of tracking's pieces on other apps' pages (the job page's run card)."""

from __future__ import annotations

from django import template

from tracking import selectors
from tracking.models import Run

register = template.Library()


@register.simple_tag
def run_state(run: Run) -> selectors.ShownState:
    """The run's state as the pages show it: a running run of a job queued again reads "Queued (preempted)"."""
    return selectors.shown_states([run])[run.pk]
