"""Pages of reliability: the report, the staff's quarantine list, and the job page's diagnoses panel."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from core.digits import is_digits
from core.errors import DomainError
from jobs.models import Job
from reliability import reports, selectors, services
from tenancy.selectors import projects_for_user


def job_panel(request: HttpRequest, job: Job) -> dict:
    """The job page's diagnoses: one per attempt that ended other than succeeded (the job is the caller's)."""
    return {"diagnoses": list(selectors.diagnoses_of_job(job))}


def cost_panel(request: HttpRequest, projects: QuerySet, start: datetime, end: datetime) -> dict:
    """The cost report's "lost to failures": GPU-hours and money of the work failed attempts lost, over the report's
    projects and range (the caller's: `projects` is what the cost report lets them see)."""
    diagnoses = selectors.diagnoses_for_user(request.user).filter(project_id__in=projects)
    return {"report": reports.reliability_report(diagnoses, start, end)}


def cost_figure(request: HttpRequest, projects: QuerySet, start: datetime, end: datetime) -> dict[str, Any]:
    """The cost report API's `lost_to_failures`: the panel's figures as data."""
    report = cost_panel(request, projects, start, end)["report"]
    return {"failures": report.failures, "gpu_hours": round(report.gpu_hours_lost, 3),
            "money": round(report.money_lost, 2), "currency": report.currency,
            "by_project": [{"project": row["name"], "failures": row["failures"],
                            "gpu_hours": row["gpu_hours_lost"], "money": row["money_lost"]}
                           for row in report.by_project]}


def _days(request: HttpRequest) -> int:
    raw = request.GET.get("days", "28")
    return min(400, max(1, int(raw))) if is_digits(raw) else 28


@login_required
def report(request: HttpRequest) -> HttpResponse:
    days = _days(request)
    until = timezone.now()
    since: datetime = until - timedelta(days=days)
    diagnoses = selectors.diagnoses_for_user(request.user)
    slug = request.GET.get("project", "")
    project = projects_for_user(request.user).filter(slug=slug).first() if slug else None
    if slug and project is None:
        raise Http404("No such project.")
    if project is not None:
        diagnoses = diagnoses.filter(project=project)
    result = reports.reliability_report(diagnoses, since, until)
    classes = [row["cause"] for row in result.by_class]
    return render(request, "reliability/report.html", {
        "report": result, "days": days, "project": project, "classes": classes,
        "projects": projects_for_user(request.user), "recent": diagnoses.filter(ended_at__gte=since)[:50],
        "quarantined": selectors.quarantined_nodes(),
    })


@login_required
def quarantine(request: HttpRequest) -> HttpResponse:
    """Staff: the quarantined nodes, why, and a release button."""
    if not request.user.is_staff:
        raise PermissionDenied
    return render(request, "reliability/quarantine.html", {"nodes": selectors.quarantined_nodes()})


@login_required
@require_POST
def release(request: HttpRequest, pk: int) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied
    node = selectors.nodes_for_user(request.user).filter(pk=pk).first()
    if node is None:
        raise Http404
    try:
        services.node_release(node, actor=request.user, note=request.POST.get("note", "")[:300])
        messages.success(request, f"Node {node} released: the scheduler places jobs there again.")
    except DomainError as error:
        messages.error(request, error.message)
    return redirect("reliability-quarantine")
