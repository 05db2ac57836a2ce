"""Quota efficiency: per project and flavor, the guarantee against what the project used of it, what of it sat idle
(in device-hours and money) and what of the idle part other projects of the organization borrowed.

- guaranteed: the project's *current* `Quota.guaranteed` x the hours of the range from the quota's creation (when
  later than the range's start, `costs.metering.existence`) up to now (guarantees have no history: a guarantee changed
  during the range counts as if it had always been the current one);
- used: the report's device-hours grouped by project and flavor; borrowed: the segments' borrowed devices x the
  time they held them; used within the guarantee: used - borrowed;
- idle: guaranteed - used within the guarantee (never below 0), priced at the flavor's list price over the range
  (no cluster's own price, no class discount);
- lent: every project's borrowed device-hours are shared among the *other* projects of its organization holding
  an idle guarantee of that flavor, in proportion to their idle device-hours; a lender is credited with at most its
  idle guarantee. Borrowers in projects the caller cannot see count too (only the lender's total is shown)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from costs.analysis import Scope, label, overlap, window_segments
from costs.metering.existence import quota_starts
from costs.metering.prices import price_book
from costs.metering.pricing import HOUR, Usage
from costs.reports.usage import ReportQuery, report_rows
from quotas.models import Quota
from tenancy.models import Project

LIST_PRICE_CLASS = 0  # no priority class has this id: the list price, without any class discount


@dataclass
class QuotaRow:
    project_id: int
    organization_id: int
    flavor_id: int
    guaranteed: int = 0  # devices, the current quota
    since_ts: int = 0  # when the guarantee started counting: the range's start, or the quota's creation if later
    guaranteed_seconds: float = 0.0
    used_seconds: float = 0.0
    used_cost: float = 0.0
    borrowed_seconds: float = 0.0
    idle_cost: float = 0.0
    lent_seconds: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def within_seconds(self) -> float:
        return max(0.0, self.used_seconds - self.borrowed_seconds)

    @property
    def idle_seconds(self) -> float:
        return max(0.0, self.guaranteed_seconds - self.within_seconds)


@dataclass
class Efficiency:
    hours: float
    rows: list[QuotaRow]

    @property
    def total(self) -> QuotaRow:
        total = QuotaRow(0, 0, 0)
        for row in self.rows:
            for name in ("guaranteed", "guaranteed_seconds", "used_seconds", "used_cost", "borrowed_seconds",
                         "idle_cost", "lent_seconds"):
                setattr(total, name, getattr(total, name) + getattr(row, name))
        return total


def quota_efficiency(scope: Scope) -> Efficiency:
    shown = set(scope.shown_projects().values_list("id", flat=True))
    # Lending happens inside an organization: its every project counts, seen by the caller or not.
    organizations = dict(Project.objects.filter(organization_id__in=Project.objects.filter(id__in=shown)
                                                .values("organization_id")).values_list("id", "organization_id"))
    cohort = Project.objects.filter(id__in=list(organizations)).values("id")
    flavor = {"flavor_id": scope.filters["flavor_id"]} if "flavor_id" in scope.filters else {}
    rows: dict[tuple[int, int], QuotaRow] = {}

    def row(project: int, flavor_id: int) -> QuotaRow:
        if (project, flavor_id) not in rows:
            rows[project, flavor_id] = QuotaRow(project, organizations[project], flavor_id)
        return rows[project, flavor_id]

    quotas = list(Quota.objects.filter(project_id__in=cohort, guaranteed__gt=0, **flavor)
                  .values_list("id", "project_id", "flavor_id", "guaranteed", "project__created_at"))
    since = quota_starts([(pk, created) for pk, _, _, _, created in quotas])
    for pk, project, flavor_id, guaranteed, _ in quotas:
        found = row(project, flavor_id)
        found.since_ts = max(scope.window.start_ts, min(since[pk], scope.until_ts))
        found.guaranteed = guaranteed
        found.guaranteed_seconds = guaranteed * (scope.until_ts - found.since_ts)
    for used in report_rows(cohort, ReportQuery(scope.window, ("project", "flavor"), None, flavor), scope.now):
        if used.device_seconds:
            found = row(*used.keys)
            found.used_seconds, found.used_cost = used.device_seconds, float(used.cost)
    start, until = scope.window.start_ts, scope.until_ts
    for _, project, flavor_id, borrowed, first, last in window_segments(
            cohort, scope.window, flavor, until, ("id", "project_id", "flavor_id", "borrowed", "start_ts", "end_ts"),
            borrowed__gt=0):
        row(project, flavor_id).borrowed_seconds += borrowed * overlap(first, last, start, until)
    _attribute_lending(rows.values())
    _price_idle(rows.values(), scope)
    shown_rows = sorted((r for r in rows.values() if r.project_id in shown), key=lambda r: -r.idle_cost)
    label(shown_rows, (("project", "project_id"), ("organization", "organization_id"), ("flavor", "flavor_id")))
    return Efficiency(scope.seconds / HOUR, shown_rows)


def _attribute_lending(rows: Iterable[QuotaRow]) -> None:
    cohorts: dict[tuple[int, int], list[QuotaRow]] = defaultdict(list)
    for found in rows:
        cohorts[found.organization_id, found.flavor_id].append(found)
    for members in cohorts.values():
        for borrower in (m for m in members if m.borrowed_seconds):
            lenders = [m for m in members if m is not borrower and m.idle_seconds]
            idle = sum(m.idle_seconds for m in lenders)
            for lender in lenders:
                lender.lent_seconds += borrower.borrowed_seconds * lender.idle_seconds / idle
        for member in members:
            member.lent_seconds = min(member.lent_seconds, member.idle_seconds)


def _price_idle(rows: Iterable[QuotaRow], scope: Scope) -> None:
    """Idle device-seconds at the flavor's average list price per device-second over the guarantee's time in the
    range."""
    book, per_second = price_book(), {}
    for found in rows:
        key = (found.flavor_id, found.since_ts)
        if found.idle_seconds and key not in per_second:
            usage = Usage(found.flavor_id, None, LIST_PRICE_CLASS, devices=1, cpu_millis=0)
            per_second[key] = book.cost(usage, found.since_ts, scope.until_ts) / (scope.until_ts - found.since_ts)
        found.idle_cost = found.idle_seconds * per_second.get(key, 0.0)

