"""Pages of quotas: the project page's quota panel (registered with tenancy's project page at start-up)."""

from __future__ import annotations

from django.http import HttpRequest

from quotas import selectors
from tenancy.models import Project


def quota_panel(request: HttpRequest, project: Project) -> dict:
    """The context of `quotas/_project_panel.html`: a bar per flavor of the project's quotas."""
    return {"quota_rows": quota_bars(request.user, project)}


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def _laid_out(scale: int, segments: list[tuple[str, int, str]]) -> list[tuple[str, int, float, float, str]]:
    """Segments side by side: each starts where the ones before it end (the bar is an SVG, positioned by
    attributes: the Content-Security-Policy refuses style attributes)."""
    laid, before = [], 0
    for kind, count, label in segments:
        laid.append((kind, count, _pct(before, scale), _pct(count, scale), label))
        before += count
    return laid


def quota_bars(user, project: Project) -> list[dict]:
    """Per flavor: guaranteed, used, borrowed, lent, and the bar's segments as (kind, count, start, width, label),
    start and width in percent of its scale.

    The scale is guarantee + borrow limit (or the usage, when a quota was lowered below it), so a full bar means
    the project uses everything it may. Segments: used within the guarantee, lent (idle guarantee others use now),
    idle guarantee, borrowed above the guarantee, and the borrowing headroom left.
    """
    quotas = list(selectors.quotas_for_user(user).filter(project=project))
    usage = selectors.live_usage(quotas)
    rows = []
    for quota in quotas:
        live = usage[quota.pk]
        within = min(live.used, quota.guaranteed)
        lent = min(live.lent, quota.guaranteed - within)
        idle = quota.guaranteed - within - lent
        headroom = max(0, quota.borrow_limit - live.borrowed)
        scale = max(quota.guaranteed + quota.borrow_limit, live.used, 1)
        rows.append({
            "quota": quota, "used": live.used, "borrowed": live.borrowed, "lent": live.lent,
            "over": live.used > quota.guaranteed + quota.borrow_limit,
            "segments": _laid_out(scale, [
                ("within", within, "used within the guarantee"),
                ("lent", lent, "guarantee lent to other projects"),
                ("idle", idle, "idle guarantee"),
                ("borrowed", live.borrowed, "borrowed above the guarantee"),
                ("headroom", headroom, "may still borrow"),
            ]),
            "guarantee_at": _pct(quota.guaranteed, scale),
        })
    return rows
