"""The reliability report: failures by class per project, cluster, node and week, mean time to recovery (failure
to running again), each job's effective training time ratio, and the GPU-hours and money lost to failures.

Read from the diagnoses (one per ended attempt), never from a scan of attempts: a diagnosis keeps the devices, the
time its attempt ran and the work lost since its last checkpoint.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from costs.metering.prices import price_book
from costs.metering.pricing import Usage
from jobs.models import Attempt, Outcome
from reliability.models import Diagnosis

FAILED = (Outcome.FAILED, Outcome.LOST)


@dataclass
class Report:
    since: datetime
    until: datetime
    failures: int = 0
    by_class: list[dict[str, Any]] = field(default_factory=list)
    by_project: list[dict[str, Any]] = field(default_factory=list)
    by_cluster: list[dict[str, Any]] = field(default_factory=list)
    by_node: list[dict[str, Any]] = field(default_factory=list)
    by_week: list[dict[str, Any]] = field(default_factory=list)
    recoveries: int = 0
    mttr_seconds: float | None = None
    gpu_hours_lost: float = 0.0
    money_lost: float = 0.0
    currency: str = ""
    jobs: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"since": self.since.isoformat(), "until": self.until.isoformat(), "failures": self.failures,
                "by_class": self.by_class, "by_project": self.by_project, "by_cluster": self.by_cluster,
                "by_node": self.by_node, "by_week": self.by_week, "recoveries": self.recoveries,
                "mttr_seconds": self.mttr_seconds, "gpu_hours_lost": round(self.gpu_hours_lost, 3),
                "money_lost": round(self.money_lost, 2), "currency": self.currency, "jobs": self.jobs}


def _counted(rows: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """[(group, cause)] -> [{"name", "failures", "by_class": {cause: n}}], most failures first."""
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for name, cause in rows:
        groups[name][cause] += 1
    return sorted(({"name": name, "failures": sum(c.values()), "by_class": dict(c.most_common())}
                   for name, c in groups.items()), key=lambda row: (-row["failures"], row["name"]))


def reliability_report(diagnoses: QuerySet[Diagnosis], since: datetime, until: datetime) -> Report:
    """The report over `diagnoses` (already scoped to the caller) of attempts that ended in [since, until)."""
    report = Report(since, until, currency=settings.TIDAL["CURRENCY"])
    rows = list(diagnoses.filter(ended_at__gte=since, ended_at__lt=until, outcome__in=FAILED).values(
        "pk", "cause", "project__slug", "cluster", "nodes", "ended_at", "devices", "lost_seconds", "ran_seconds",
        "job_id", "attempt__number", "attempt__checkpoint_at", "attempt__started_at", "attempt__admitted_at",
        "attempt__cluster_id", "job__flavor_id", "job__priority_class_id", "attempt__details", "attempt__placement"))
    report.failures = len(rows)
    report.by_class = [{"cause": cause, "failures": n} for cause, n in Counter(r["cause"] for r in rows).most_common()]
    report.by_project = _counted([(r["project__slug"], r["cause"]) for r in rows])
    report.by_cluster = _counted([(r["cluster"] or "-", r["cause"]) for r in rows])
    report.by_node = _counted([(f"{r['cluster']}/{node}", r["cause"]) for r in rows for node in _nodes(r)])
    weeks = [((r["ended_at"] - timedelta(days=r["ended_at"].weekday())).date().isoformat(), r["cause"])
             for r in rows]
    report.by_week = sorted(_counted(weeks), key=lambda row: row["name"])
    _recovery(report, rows)
    _lost(report, rows)
    _lost_by_project(report, rows)
    report.jobs = _effective_ratios({r["job_id"] for r in rows}, until)
    return report


def _nodes(row: dict[str, Any]) -> list[str]:
    """The nodes a failure is counted against: those its evidence names, else its failed replica's, else the
    attempt's only node (a failure of a gang spread over many nodes names none of them by itself)."""
    if row["nodes"]:
        return [str(n) for n in row["nodes"]]
    node = (row["attempt__details"] or {}).get("node")
    if node:
        return [str(node)]
    placed = {str(p.get("node")) for p in row["attempt__placement"] or [] if p.get("node")}
    return list(placed) if len(placed) == 1 else []


def _recovery(report: Report, rows: list[dict[str, Any]]) -> None:
    """Mean time from a failure to the job running again (its next attempt started)."""
    keys = {(r["job_id"], r["attempt__number"] + 1) for r in rows}
    if not keys:
        return
    starts = {(job, number): started for job, number, started in Attempt.objects.filter(
        job_id__in={k[0] for k in keys}, started_at__isnull=False).values_list("job_id", "number", "started_at")}
    gaps = [(starts[(r["job_id"], r["attempt__number"] + 1)] - r["ended_at"]).total_seconds() for r in rows
            if (r["job_id"], r["attempt__number"] + 1) in starts]
    report.recoveries = len(gaps)
    report.mttr_seconds = round(sum(gaps) / len(gaps), 1) if gaps else None


def _lost(report: Report, rows: list[dict[str, Any]]) -> None:
    """Device-hours of the work lost (since each attempt's last checkpoint, or its start), priced; kept on each row
    too (`_gpu_hours`, `_money`) for the breakdown by project."""
    book = price_book()
    for r in rows:
        r["_gpu_hours"], r["_money"] = r["devices"] * r["lost_seconds"] / 3600, 0.0
        if r["lost_seconds"] and r["devices"]:
            end = r["ended_at"].timestamp()
            usage = Usage(r["job__flavor_id"], r["attempt__cluster_id"], r["job__priority_class_id"], r["devices"], 0)
            r["_money"] = book.cost(usage, end - r["lost_seconds"], end)
        report.gpu_hours_lost += r["_gpu_hours"]
        report.money_lost += r["_money"]


def _lost_by_project(report: Report, rows: list[dict[str, Any]]) -> None:
    """Each project's row of `by_project` gets the GPU-hours and money its failures lost."""
    hours: Counter[str] = Counter()
    money: Counter[str] = Counter()
    for r in rows:
        hours[r["project__slug"]] += r["_gpu_hours"]
        money[r["project__slug"]] += r["_money"]
    for row in report.by_project:
        row["gpu_hours_lost"] = round(hours[row["name"]], 3)
        row["money_lost"] = round(money[row["name"]], 2)


def _effective_ratios(job_ids: set[int], until: datetime) -> list[dict[str, Any]]:
    """Per job: productive time / wall time, where wall time runs from its first attempt's start to its last
    attempt's end (or `until`), and productive time is the time its attempts ran minus the work each failure lost
    since the last checkpoint."""
    if not job_ids:
        return []
    attempts: dict[int, list[tuple]] = defaultdict(list)
    for row in Attempt.objects.filter(job_id__in=job_ids).values_list(
            "job_id", "job__name", "started_at", "ended_at", "admitted_at", "diagnosis__lost_seconds"):
        attempts[row[0]].append(row)
    result = []
    for job_id, rows in attempts.items():
        began = min((r[2] or r[4] for r in rows), default=None)
        if began is None:
            continue
        end = max((r[3] or until for r in rows), default=until)
        wall = max(0.0, (end - began).total_seconds())
        ran = sum(((r[3] or until) - r[2]).total_seconds() for r in rows if r[2])
        lost = sum(r[5] or 0.0 for r in rows)
        productive = max(0.0, ran - lost)
        result.append({"job": job_id, "name": rows[0][1], "attempts": len(rows), "wall_seconds": round(wall),
                       "productive_seconds": round(productive),
                       "ratio": round(productive / wall, 3) if wall else None})
    return sorted(result, key=lambda r: (r["ratio"] if r["ratio"] is not None else 2, r["job"]))
