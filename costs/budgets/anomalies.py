"""Spend anomaly alerts: a project's day of spend over a multiple (3 by default) of the median of the days before it
(14 by default; per project: `SpendAnomalyRule`) alerts once per project and day, through the notifications app:
the project's enabled webhooks (event `cost.anomaly`) and, with a mail server, its owners and admins.

Checked every few minutes (Celery beat's `costs-check-spend-anomalies`, or the embedded loop) on today so far and
on yesterday whole (a check missed yesterday still alerts): a day's spend only grows, so today alerts as soon as it
crosses. The spend is the cost reports' (one report of every project per day over the longest trailing window), so
an alert never disagrees with the cost page. Money is compared in Decimal to the 1e-4 of the currency: the median
and the multiple are exact, a day at exactly the multiple does not alert. A project whose trailing median is 0 (new,
or idle most days) has no baseline and does not alert."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from statistics import median

from celery import shared_task
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from costs.models import SpendAnomalyAlert, SpendAnomalyRule
from costs.reports.usage import ReportQuery, Window, usage_report
from notifications import send
from tenancy.models import Project, Role

EVENT = "cost.anomaly"
CENT = Decimal("0.0001")


@dataclass(frozen=True)
class Terms:
    multiple: Decimal
    trailing_days: int


def default_terms() -> Terms:
    return Terms(Decimal(str(settings.TIDAL["COST_ANOMALY_MULTIPLE"])).quantize(Decimal("0.01")),
                 settings.TIDAL["COST_ANOMALY_TRAILING_DAYS"])


@dataclass(frozen=True)
class Anomaly:
    project_id: int
    day: date
    spent: Decimal
    median: Decimal
    terms: Terms

    @property
    def ratio(self) -> Decimal:
        return (self.spent / self.median).quantize(Decimal("0.01"))


def anomalous(daily: dict[date, Decimal], day: date, terms: Terms) -> Anomaly | None:
    """Pure: whether `day`'s spend is over `terms.multiple` x the median of the `terms.trailing_days` days before it
    (days without spend count as 0). `daily` maps days to spend; the project is filled in by the caller."""
    trailing = [daily.get(day - timedelta(days=back), Decimal(0)) for back in range(1, terms.trailing_days + 1)]
    baseline = Decimal(median(trailing)).quantize(CENT)
    spent = daily.get(day, Decimal(0))
    if baseline <= 0 or spent <= baseline * terms.multiple:
        return None
    return Anomaly(0, day, spent, baseline, terms)


def project_terms() -> tuple[dict[int, Terms], set[int]]:
    """Each project's own terms, and the projects whose rule is disabled."""
    terms, off = {}, set()
    for project, multiple, days, enabled in SpendAnomalyRule.objects.values_list("project_id", "multiple",
                                                                                 "trailing_days", "enabled"):
        terms[project] = Terms(multiple, days)
        if not enabled:
            off.add(project)
    return terms, off


def find_anomalies(now: datetime) -> list[Anomaly]:
    """Today so far and yesterday, of every project: one daily report over the longest trailing window."""
    today = now.astimezone(UTC).date()
    own, off = project_terms()
    default = default_terms()
    longest = max([default.trailing_days, *(t.trailing_days for t in own.values())])
    window = Window(today - timedelta(days=longest + 1), today + timedelta(days=1))
    report = usage_report(Project.objects.values("id"), ReportQuery(window, ("project",), "day"), now)
    daily: dict[int, dict[date, Decimal]] = defaultdict(dict)
    for row in report.rows:
        daily[row.keys[0]][row.period] = row.cost.quantize(CENT)  # type: ignore[index]
    found = []
    for project, days in daily.items():
        if project in off:
            continue
        terms = own.get(project, default)
        for day in (today - timedelta(days=1), today):
            anomaly = anomalous(days, day, terms)
            if anomaly is not None:
                found.append(Anomaly(project, day, anomaly.spent, anomaly.median, terms))
    return found


def anomaly_body(anomaly: Anomaly, slug: str, now: datetime) -> str:
    """What a webhook receives (docs/costs.md#spend-anomalies)."""
    return json.dumps({
        "event": EVENT, "sent_at": now.isoformat(), "project": slug,
        "anomaly": {"day": anomaly.day.isoformat(), "spent": float(anomaly.spent), "median": float(anomaly.median),
                    "multiple": float(anomaly.terms.multiple), "ratio": float(anomaly.ratio),
                    "trailing_days": anomaly.terms.trailing_days, "currency": settings.TIDAL["CURRENCY"],
                    "url": f"{settings.TIDAL['URL']}/costs/?project={slug}&start={anomaly.day}&end={anomaly.day}"
                           "&step=hour"},
    }, separators=(",", ":"))


@shared_task(name="costs.budgets.anomalies.notify_anomaly_task")
def notify_anomaly_task(project_id: int, body: str) -> None:
    """The project's enabled webhooks and, with a mail server, its owners and admins."""
    send.to_webhooks(project_id, body, EVENT)
    if not send.mail_configured():
        return
    data = json.loads(body)
    found = data["anomaly"]
    currency = found["currency"]
    send.to_members(project_id, [Role.OWNER, Role.ADMIN],
                    subject=f"[Tidal] {data['project']} spent {found['ratio']}x its usual on {found['day']}",
                    message=(f"Project {data['project']} spent {found['spent']:,.2f} {currency} on {found['day']} "
                             f"(UTC), {found['ratio']}x the median of the {found['trailing_days']} days before it "
                             f"({found['median']:,.2f} {currency}); it alerts over {found['multiple']}x.\n\n"
                             f"Per hour: {found['url']}\n"))


def _record(anomaly: Anomaly, now: datetime) -> bool:
    try:
        with transaction.atomic():
            SpendAnomalyAlert.objects.create(project_id=anomaly.project_id, day=anomaly.day, spent=anomaly.spent,
                                             median=anomaly.median, multiple=anomaly.terms.multiple,
                                             trailing_days=anomaly.terms.trailing_days, created_at=now)
    except IntegrityError:  # alerted already (this day, or by a check running at the same moment)
        return False
    return True


def check_spend_anomalies(now: datetime | None = None) -> int:
    """Record and notify each project's anomalous day once; returns how many it recorded."""
    now = now or timezone.now()
    found = find_anomalies(now)
    if not found:
        return 0
    done = set(SpendAnomalyAlert.objects.filter(day__in={a.day for a in found}).values_list("project_id", "day"))
    slugs = dict(Project.objects.filter(pk__in={a.project_id for a in found}).values_list("id", "slug"))
    recorded = 0
    for anomaly in found:
        if (anomaly.project_id, anomaly.day) in done or not _record(anomaly, now):
            continue
        recorded += 1
        body = anomaly_body(anomaly, slugs[anomaly.project_id], now)
        # robust: a broken notifier must not undo or fail the check; the alert rows are the record.
        transaction.on_commit(lambda p=anomaly.project_id, b=body: notify_anomaly_task.delay(p, b), robust=True)
    return recorded
