"""Template tags of tracking's pieces on other apps' pages (the job page's run card)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from tracking import selectors
from tracking.models import Run

register = template.Library()
# "js-default": CommonMark without raw HTML (a <script> in a note is shown as text) and without linkify; markdown-it's
# link check refuses javascript:, vbscript:, file: and data: URLs (but images' data:), so a note renders nothing that
# runs.
NOTES = MarkdownIt("js-default")


@register.filter
def markdown(text: str) -> SafeString:
    """A run's note as HTML: markdown rendered with raw HTML escaped, safe to put in the page."""
    return mark_safe(NOTES.render(text or ""))  # noqa: S308 - the renderer escapes every HTML character of the text


@register.simple_tag
def run_state(run: Run) -> selectors.ShownState:
    """The run's state as the pages show it: a running run of a job queued again reads "Queued (preempted)"."""
    return selectors.shown_states([run])[run.pk]
