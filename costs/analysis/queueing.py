"""Queueing: how long jobs waited for capacity, per project and flavor.

Every admission in the window counts one wait, whole: from the moment the job entered the queue for that attempt
(its submission for the first, its requeue after a preemption or a failure for the next ones: the `queued`
transition event of that attempt number) to the attempt's admission. A retrying job's backoff is not a wait: it
enters the queue when the backoff ends. Device-hours waited are the wait x the devices the job asks. Median and
p90 interpolate between the closest ranks. Jobs still in the queue now that entered it before the end of the window
are counted apart, their wait up to now."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, time

from django.db.models import OuterRef, Subquery

from costs.analysis import Scope, label, percentile
from jobs.models import Attempt, Job, JobEvent
from jobs.states import State

# The report's filters, as columns of a job.
JOB_COLUMNS = {"project_id": "project_id", "organization_id": "project__organization_id", "flavor_id": "flavor_id"}


@dataclass
class QueueRow:
    project_id: int | None
    flavor_id: int | None
    waits: list[float] = field(default_factory=list)  # seconds, one per admission
    wait_device_seconds: float = 0.0
    waiting_jobs: int = 0
    waiting_device_seconds: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def median(self) -> float | None:
        return percentile(sorted(self.waits), 0.5)

    @property
    def p90(self) -> float | None:
        return percentile(sorted(self.waits), 0.9)


@dataclass
class Queueing:
    rows: list[QueueRow]

    @property
    def total(self) -> QueueRow:
        total = QueueRow(None, None)
        for row in self.rows:
            total.waits += row.waits
            total.wait_device_seconds += row.wait_device_seconds
            total.waiting_jobs += row.waiting_jobs
            total.waiting_device_seconds += row.waiting_device_seconds
        return total


def queueing(scope: Scope) -> Queueing:
    rows: dict[tuple[int, int], QueueRow] = {}

    def row(project: int, flavor: int) -> QueueRow:
        return rows.setdefault((project, flavor), QueueRow(project, flavor))

    for project, flavor, devices, admitted, queued in _admissions(scope):
        if admitted is None or queued is None:  # the job was deleted with its attempts and events
            continue
        wait = max(0.0, (admitted - queued).total_seconds())
        found = row(project, flavor)
        found.waits.append(wait)
        found.wait_device_seconds += wait * devices
    filters = {JOB_COLUMNS[column]: value for column, value in scope.filters.items()}
    window_end = datetime.fromtimestamp(scope.window.end_ts, UTC)
    for project, flavor, devices, queued in (Job.objects.filter(state=State.QUEUED, project_id__in=scope.projects,
                                                                queued_at__lt=window_end, **filters)
                                             .values_list("project_id", "flavor_id", "total_devices", "queued_at")):
        found = row(project, flavor)
        found.waiting_jobs += 1
        found.waiting_device_seconds += max(0.0, (scope.now - queued).total_seconds()) * devices
    ordered = sorted(rows.values(), key=lambda r: -(r.wait_device_seconds + r.waiting_device_seconds))
    label(ordered, (("project", "project_id"), ("flavor", "flavor_id")))
    return Queueing(ordered)


def _admissions(scope: Scope) -> Iterator[tuple]:
    """(project, flavor, devices, admitted at, queued at) of every admission in the window, whether its gang ran
    (and was billed) or not."""
    queued = (JobEvent.objects.filter(job_id=OuterRef("job_id"), attempt=OuterRef("number"),
                                      to_state=State.QUEUED).order_by("-created_at").values("created_at")[:1])
    filters = {f"job__{JOB_COLUMNS[column]}": value for column, value in scope.filters.items()}
    start, end = (datetime.combine(day, time(), UTC) for day in (scope.window.start, scope.window.end))
    return (Attempt.objects.filter(job__project_id__in=scope.projects, admitted_at__gte=start, admitted_at__lt=end,
                                   **filters)
            .annotate(queued_at=Subquery(queued))
            .values_list("job__project_id", "job__flavor_id", "job__total_devices", "admitted_at", "queued_at")
            .iterator(chunk_size=2000))
