"""The idle guarantee of the main report (`costs.reports.idle`), counted by the quota efficiency analysis
(`costs.analysis.efficiency`: current guarantees from the quota's creation, used within the guarantee, priced at the
flavor's list price) and summed over each project's flavors. Guarantees are not per cluster, so a report filtered
by cluster has none."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import QuerySet

from costs.analysis import Scope, label
from costs.analysis.efficiency import quota_efficiency
from costs.reports.idle import IdleGuarantee, IdleRow
from costs.reports.usage import ReportQuery

FILTERS = ("project_id", "organization_id", "flavor_id")  # the report's filters a guarantee has


def idle_guarantee(projects: QuerySet, query: ReportQuery, now: datetime) -> IdleGuarantee | None:
    """The idle guarantee of the visible projects the report's filters keep, as of `now` (the report's moment),
    costliest first; None for a report filtered by cluster."""
    if "cluster_id" in query.filters:
        return None
    filters = {name: query.filters[name] for name in FILTERS if name in query.filters}
    efficiency = quota_efficiency(Scope(projects, query.window, filters, now))
    found: dict[int, IdleRow] = {}
    for quota in efficiency.rows:
        if not quota.guaranteed_seconds:
            continue
        row = found.setdefault(quota.project_id, IdleRow(quota.project_id, quota.organization_id))
        row.guaranteed_seconds += quota.guaranteed_seconds
        row.idle_seconds += quota.idle_seconds
        row.idle_cost += quota.idle_cost
    rows: Sequence[IdleRow] = sorted(found.values(), key=lambda r: (-r.idle_cost, -r.idle_seconds, r.project_id))
    label(rows, (("project", "project_id"), ("organization", "organization_id")))
    return IdleGuarantee(list(rows))
