"""Waste, per job, inside the window (device-hours and money, priced as the report prices):

- failed: the attempts that ended failed or lost, whole (the report's own rows, filtered by outcome);
- lost work: what preempted, failed and lost attempts computed since their last checkpoint, from the later of the
  checkpoint and the attempt's start (every replica running) to its end: a later attempt resumes from that
  checkpoint and computes it again. An attempt that never started lost no work;
- low GPU utilization: device-hours at utilization under a threshold (`costs.analysis.gpu`).

The three overlap (a failed attempt's lost work is part of it, and so may its idle GPUs be): they are not added."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from costs.analysis import Scope, label, window_segments
from costs.analysis.gpu import Held, low_utilization
from costs.metering.prices import price_book
from costs.metering.pricing import Usage
from costs.reports.usage import ReportQuery, report_rows
from jobs.models import Outcome

FAILED = (Outcome.FAILED, Outcome.LOST)
INTERRUPTED = (Outcome.PREEMPTED, Outcome.FAILED, Outcome.LOST)
DEFAULT_GPU_UTIL_BELOW = 20.0
SEGMENT_FIELDS = ("id", "job_id", "attempt_number", "project_id", "flavor_id", "cluster_id", "priority_class_id",
                  "devices", "cpu_millis", "start_ts", "end_ts", "outcome", "attempt__started_at",
                  "attempt__checkpoint_at")


@dataclass
class WasteRow:
    job_id: int | None
    project_id: int
    flavor_id: int
    failed_seconds: float = 0.0
    failed_cost: float = 0.0
    lost_seconds: float = 0.0
    lost_cost: float = 0.0
    low_seconds: float = 0.0  # by SM activity where the run has GPU telemetry, else by utilization
    low_cost: float = 0.0
    low_gpu_util_seconds: float = 0.0  # by GPU utilization alone (DCGM's GPU_UTIL or the SDK's), shown beside it
    labels: dict[str, str] = field(default_factory=dict)

    FIGURES = ("failed_seconds", "failed_cost", "lost_seconds", "lost_cost", "low_seconds", "low_cost",
               "low_gpu_util_seconds")


@dataclass
class Waste:
    gpu_util_below: float
    rows: list[WasteRow]

    @property
    def total(self) -> WasteRow:
        total = WasteRow(None, 0, 0)
        for row in self.rows:
            for name in WasteRow.FIGURES:
                setattr(total, name, getattr(total, name) + getattr(row, name))
        return total


def waste(scope: Scope, gpu_util_below: float = DEFAULT_GPU_UTIL_BELOW) -> Waste:
    rows: dict[tuple, WasteRow] = {}

    def row(job: int | None, project: int, flavor: int) -> WasteRow:
        return rows.setdefault((job, project, flavor), WasteRow(job, project, flavor))

    failed = ReportQuery(scope.window, ("job", "project", "flavor"), None, {**scope.filters, "outcome__in": FAILED})
    for used in report_rows(scope.projects, failed, scope.now):
        found = row(*used.keys)
        found.failed_seconds, found.failed_cost = used.device_seconds, float(used.cost)  # an estimate beside lost time
    book, held, jobs = price_book(), {}, {}
    for (_, job, number, project, flavor, cluster, klass, devices, cpu, first, last, outcome, started,
         checkpoint) in window_segments(scope.projects, scope.window, scope.filters, scope.until_ts, SEGMENT_FIELDS):
        usage = Usage(flavor, cluster, klass, devices, cpu)
        if job is not None and devices:
            held[job, number] = Held(usage, first, last)
            jobs[job] = (project, flavor)
        lost = _since_checkpoint(scope, last, started, checkpoint) if outcome in INTERRUPTED else None
        if lost is not None:
            found = row(job, project, flavor)
            found.lost_seconds += devices * (lost[1] - lost[0])
            found.lost_cost += book.cost(usage, *lost)
    for job, low in low_utilization(scope, held, gpu_util_below, book).items():
        found = row(job, *jobs[job])
        found.low_seconds, found.low_cost = low.device_seconds, low.cost
    for job, low in low_utilization(scope, held, gpu_util_below, book, sm_activity=False).items():
        row(job, *jobs[job]).low_gpu_util_seconds = low.device_seconds
    ordered = sorted(rows.values(), key=lambda r: -max(r.failed_cost, r.lost_cost, r.low_cost))
    label(ordered, (("job", "job_id"), ("project", "project_id"), ("flavor", "flavor_id")))
    return Waste(gpu_util_below, ordered)


def _since_checkpoint(scope: Scope, end: int, started: datetime | None,
                      checkpoint: datetime | None) -> tuple[int, int] | None:
    """The part inside the window of an ended attempt's work after its last checkpoint; None when there is none."""
    if started is None:  # it never ran: no work to lose
        return None
    since = max(int(started.timestamp()), int(checkpoint.timestamp()) if checkpoint else 0, scope.window.start_ts)
    until = min(end, scope.until_ts)
    return (since, until) if until > since else None
