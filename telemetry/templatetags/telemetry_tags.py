"""Template tags of telemetry's pieces on other apps' pages: the job page's GPU panel, the Clusters page's activity
grid, and the GPU efficiency columns of the jobs and runs tables (one query per page, not per row)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django import template

from jobs.models import Attempt, Job
from telemetry import readings, selectors
from telemetry.models import AttemptTelemetry
from tenancy.selectors import project_ids_for_user

register = template.Library()

HEAT_LEVELS = 10  # heat-0 .. heat-10: the stylesheet's colours (the CSP allows no inline styles)
CHART_WIDTH, CHART_HEIGHT = 300, 80
CHART_FIELDS = (("sm_active", "SM activity", "%", 100.0), ("utilization", "GPU utilization", "%", 100.0),
                ("memory_used_gib", "Memory used", "GiB", None), ("power_watts", "Power", "W", None))


def heat(value: float | None) -> str:
    """The colour class of a percentage (none when there is no reading)."""
    if value is None:
        return "heat-none"
    return f"heat-{max(0, min(HEAT_LEVELS, round(value / 100 * HEAT_LEVELS)))}"


@dataclass
class Chart:
    title: str
    unit: str
    top: float
    lines: list[tuple[int, str]]  # (GPU ordinal, SVG polyline points)


def _chart(series: dict[int, list[float | None]], title: str, unit: str, top: float | None) -> Chart:
    values = [v for line in series.values() for v in line if v is not None]
    top = top or (max(values) * 1.1 if values else 1.0) or 1.0
    lines = []
    for ordinal, line in sorted(series.items()):
        step = CHART_WIDTH / max(1, len(line) - 1)
        points = " ".join(f"{i * step:.1f},{CHART_HEIGHT - min(v, top) / top * CHART_HEIGHT:.1f}"
                          for i, v in enumerate(line) if v is not None)
        lines.append((ordinal, points))
    return Chart(title, unit, top, lines)


@register.inclusion_tag("telemetry/_job_gpus.html")
def job_gpus(job: Job, attempt: Attempt | None = None) -> dict[str, Any]:
    """The job page's GPU panel for its current attempt, or the latest attempt that has telemetry. The job page
    already checked the caller may see the job."""
    tallies = AttemptTelemetry.objects.filter(attempt__job=job).select_related("attempt")
    tally = (tallies.filter(attempt=attempt).first() if attempt is not None else None) or \
        tallies.order_by("-attempt__number").first()
    if tally is None:
        return {"tally": None}
    gpus = list(tally.attempt.gpus.all())
    found = readings.attempt_readings(tally, gpus, buckets=40)
    sm = found.series.get("sm_active", {})
    if not any(v is not None for line in sm.values() for v in line):
        sm = found.series.get("utilization", {})  # GPUs without DCGM's profiling metrics
    rows = [(gpu, [(value, heat(value)) for value in sm.get(gpu.ordinal, [])]) for gpu in gpus]
    charts = [_chart(found.series[name], title, unit, top) for name, title, unit, top in CHART_FIELDS
              if any(v is not None for line in found.series.get(name, {}).values() for v in line)]
    return {"tally": tally, "rows": rows, "charts": charts, "width": CHART_WIDTH, "height": CHART_HEIGHT,
            "bucket_seconds": found.bucket_ms / 1000, "efficiency": tally.sm_active,
            "utilization": tally.utilization}


@register.simple_tag
def gpu_efficiencies(job_ids: Iterable[Any]) -> dict[int, AttemptTelemetry]:
    """Per job id (the page's rows, which the caller sees): its latest attempt's tally."""
    return selectors.efficiencies([int(i) for i in job_ids if i is not None])


@register.filter
def efficiency_of(found: dict[int, AttemptTelemetry], job_id: int | None) -> str:
    tally = found.get(job_id) if job_id is not None else None
    if tally is None:
        return "–"
    if tally.sm_active is not None:
        return f"{tally.sm_active:.0f}% SM"
    return f"{tally.utilization:.0f}% util" if tally.utilization is not None else "–"


@register.filter
def ids(rows: Iterable[Any], attribute: str = "pk") -> list[Any]:
    return [getattr(row, attribute) for row in rows]


@register.filter
def runs_jobs(rows: Iterable[dict[str, Any]]) -> list[int | None]:
    """The job ids of the runs table's rows."""
    return [row["run"].job_id for row in rows]


@dataclass
class GpuCell:
    css: str
    title: str
    job: int | None


@register.simple_tag(takes_context=True)
def gpu_activity(context: dict[str, Any]) -> dict[tuple[int, str], list[GpuCell]]:
    """Per (cluster id, node name): a cell per GPU of the node with a fresh reading, by GPU index, coloured by SM
    activity; the project and job are named only to their members ("another project" otherwise)."""
    user = context["request"].user
    visible = set(project_ids_for_user(user).values_list("id", flat=True))
    found: dict[tuple[int, str], dict[int, GpuCell]] = {}
    for gpu in selectors.current_gpus():
        attempt = gpu.attempt
        value = gpu.last_sm_active if gpu.last_sm_active is not None else gpu.last_utilization
        mine = attempt.job.project_id in visible
        whose = f"#{attempt.job_id} {attempt.job.project.slug}" if mine else "another project"
        shown = "no reading" if value is None else f"{value:.0f}% SM active"
        found.setdefault((attempt.cluster_id, gpu.node), {})[gpu.gpu] = GpuCell(
            heat(value), f"GPU {gpu.gpu}: {shown} ({whose})", attempt.job_id if mine else None)
    return {node: [cells[i] for i in sorted(cells)] for node, cells in found.items()}


@register.filter
def node_activity(found: dict[tuple[int, str], list[GpuCell]], node: Any) -> list[GpuCell]:
    return found.get((node.cluster_id, node.name), [])
