"""Pages for jobs: list, detail (with a polled live fragment), the YAML submit form, cancel/resubmit, the queue.

Reads go through `jobs.selectors` (scoped to the caller's projects; another tenant's job is a 404), writes through
`jobs.services` (which check roles again). Views only choose what to show.
"""

from __future__ import annotations

from datetime import datetime

import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from core.digits import is_digits
from core.errors import DomainError, Forbidden
from jobs import selectors, services
from jobs.forms import JobFilterForm, JobSpecForm, LauncherForm
from jobs.logs import job_logs as read_logs
from jobs.logs import replicas_of
from jobs.models import Job, Launcher
from jobs.panels import job_panels
from jobs.scheduling.forecast import NO_EARLIER
from jobs.serializers import workers_of
from jobs.states import FINAL, State
from jobs.templates_launcher import launcher_template
from jobs.workers_chart import workers_chart
from quotas import selectors as quota_selectors
from tenancy.models import Role
from tenancy.permissions import can_manage_job, has_role, role_in_project

PAGE_SIZE = 25
POLL_SECONDS = 4


def _ahead(moment: datetime, now: datetime) -> str | None:
    """'25 min', '3 h 10 min', '2 days' from now; None within a minute."""
    seconds = (moment - now).total_seconds()
    if seconds <= 60:
        return None
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    return f"{round(hours / 24)} days"


def humanize_eta(eta: datetime | None, now: datetime | None = None) -> str:
    """'in 25 min', 'in 3 h 10 min', 'in 2 days', 'any moment' or 'unknown'."""
    if eta is None:
        return "unknown"
    ahead = _ahead(eta, now or timezone.now())
    return f"in {ahead}" if ahead else "any moment"


def estimate_text(job: Job, now: datetime | None = None) -> str:
    """A waiting job's estimated start as the scheduler wrote it: 'in 25 min (now to 1 h 10 min)' with its range
    (open at the late end: '(10 min or later)'), 'no earlier than 3 h from now' when the forecast did not reach it,
    why it has none ('beyond 24 h', 'no runtime known', ...), or 'unknown' before the scheduler looked."""
    now = now or timezone.now()
    if job.eta is None:
        return job.eta_note or "unknown"
    if job.eta_note == NO_EARLIER:
        ahead = _ahead(job.eta, now)
        return f"{NO_EARLIER} {ahead} from now" if ahead else "any moment"
    text = humanize_eta(job.eta, now)
    if job.eta_low is None:
        return text
    low = _ahead(job.eta_low, now) or "now"
    if job.eta_high is None:
        return f"{text} ({low} or later)"
    high = _ahead(job.eta_high, now) or "now"
    return text if low == high else f"{text} ({low} to {high})"


def can_manage(request: HttpRequest, job: Job) -> bool:
    """Whether the caller manages the job (the rule the services apply)."""
    return can_manage_job(request.user, role_in_project(request.user, job.project), job.submitter_id)


def _job_or_404(request: HttpRequest, pk: int, *, detail: bool = False) -> Job:
    jobs = selectors.job_detail_for_user(request.user) if detail else selectors.jobs_for_user(request.user)
    job = jobs.filter(pk=pk).first()
    if job is None:
        raise Http404("No such job.")
    return job


def _current_project_or_none(request: HttpRequest):
    project = getattr(request, "project", None)
    return project if project else None


def _with_eta(jobs, now: datetime | None = None):
    now = now or timezone.now()
    for job in jobs:
        job.eta_text = estimate_text(job, now) if job.state == State.QUEUED else ""
    return jobs


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    project = _current_project_or_none(request)
    form = JobFilterForm(request.GET or None)
    show_all = form.is_valid() and form.cleaned_data["all"]
    jobs = selectors.jobs_for_user(request.user)
    if project and not show_all:
        jobs = jobs.filter(project=project)
    jobs = form.filter(jobs).order_by("-submitted_at", "-id")
    page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
    _with_eta(page.object_list)
    can_submit = bool(project) and has_role(request.user, project, Role.MEMBER) and not project.archived
    return render(request, "jobs/job_list.html", {
        "project": project, "form": form, "page": page, "show_all": show_all or not project,
        "can_submit": can_submit,
    })


def can_resubmit(request: HttpRequest, job: Job) -> bool:
    """Members and above resubmit a job they see, as their own, when they may read its env (as services)."""
    if not has_role(request.user, job.project, Role.MEMBER):
        return False
    return not job.env or selectors.may_read_env(request.user, job)


def _detail_context(request: HttpRequest, job: Job) -> dict:
    attempts = list(job.attempts.all())
    workers = workers_of(job)
    return {
        "job": job,
        "env": selectors.env_shown_to(request.user, job),
        "attempt": job.current_attempt,
        "attempts": attempts,
        "groups": list(job.groups.all()),
        "events": list(job.events.all()),
        "final": job.state in FINAL,
        "can_manage": can_manage(request, job),
        "can_resubmit": can_resubmit(request, job),
        "eta_text": estimate_text(job) if job.state == State.QUEUED else "",
        "poll_seconds": POLL_SECONDS,
        "workers": workers,  # an elastic job's size: "running 6 of 2..8 workers"
        "resizes": [(a.number, r) for a in attempts for r in a.resizes.all()],
        "workers_chart": workers_chart(attempts, timezone.now(), workers["max"]) if workers else None,
    }


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job_or_404(request, pk, detail=True)
    context = _detail_context(request, job)
    context["spec_yaml"] = spec_as_yaml(job, context["groups"], context["env"])
    context["logs"] = _logs_context(request, job)
    context["panels"] = job_panels(request, job)
    return render(request, "jobs/job_detail.html", context)


@login_required
def job_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The part of the detail page that changes (state, waiting, placement, timeline, actions), for htmx polling."""
    job = _job_or_404(request, pk, detail=True)
    return render(request, "jobs/_job_live.html", _detail_context(request, job))


def _logs_context(request: HttpRequest, job: Job) -> dict:
    """The log panel: one replica of one attempt. It refreshes itself while the job has not finished, so it follows
    the attempt from queued to running (live lines) to ended (the lines it kept); unticking Follow stops it."""
    replicas = replicas_of(job)
    replica = request.GET.get("replica") or (replicas[0] if replicas else "")
    numbers = [a.number for a in job.attempts.all()]
    number = request.GET.get("attempt", "")
    chosen = int(number) if is_digits(number) and int(number) in numbers else None
    follow = request.GET.get("follow", "1") == "1" and job.state not in FINAL and chosen is None
    try:
        body = read_logs(job, replica=replica, tail=200, attempt=chosen)
    except DomainError as error:
        body = {"lines": [], "message": error.message, "source": "none", "attempt": chosen}
    return {"job": job, "replicas": replicas, "replica": replica, "attempts": numbers, "chosen": chosen,
            "follow": follow, "log": body, "poll_seconds": POLL_SECONDS}


@login_required
def job_logs(request: HttpRequest, pk: int) -> HttpResponse:
    """The log panel of the job page (htmx swaps it in; it polls itself while following)."""
    job = _job_or_404(request, pk, detail=True)
    return render(request, "jobs/_logs.html", _logs_context(request, job))


def spec_as_yaml(job: Job, groups, env: dict[str, str]) -> str:
    """The job's spec in the submit form's format (to copy, or to edit and submit again), with `env` as the caller
    may see it."""
    spec = {name: getattr(job, name) for name in services.SPEC_FIELDS}
    spec["env"] = env
    spec["priority_class"] = job.priority_class.name
    spec["groups"] = [{"role": g.role, "replicas": g.replicas if g.min_replicas is None else
                       {"min": g.min_replicas, "max": g.replicas}, "devices": g.devices, "flavor": g.flavor.name,
                       "cpu_millis": g.cpu_millis, "memory_mib": g.memory_mib, "rdma": g.rdma} for g in groups]
    spec = {key: value for key, value in spec.items() if value not in (None, "", [], {})}
    return yaml.safe_dump(spec, sort_keys=False, default_flow_style=None, width=100)


def _manage_or_403(request: HttpRequest, pk: int) -> Job:
    job = _job_or_404(request, pk, detail=True)
    if not can_manage(request, job):
        raise PermissionDenied("Members can only manage their own jobs; viewers none.")
    return job


@login_required
@require_POST
def job_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    job = _manage_or_403(request, pk)
    try:
        services.job_cancel(actor=request.user, job=job)
        messages.success(request, f"Job #{job.pk} cancelled.")
    except Forbidden as error:
        raise PermissionDenied(error.message) from error
    except DomainError as error:
        messages.error(request, error.message)
    return redirect("job_detail", pk=job.pk)


@login_required
@require_POST
def job_scale(request: HttpRequest, pk: int) -> HttpResponse:
    """An elastic job's new maximum, from the job page's form (the service checks it, as for the API)."""
    job = _manage_or_403(request, pk)
    text = request.POST.get("max", "").strip()
    if not is_digits(text):
        messages.error(request, f"max: a whole number of workers, not {text[:20]!r}.")
        return redirect("job_detail", pk=job.pk)
    try:
        services.job_scale(actor=request.user, job=job, maximum=int(text), role=request.POST.get("role") or None)
        messages.success(request, f"Job #{job.pk}: at most {int(text)} workers.")
    except Forbidden as error:
        raise PermissionDenied(error.message) from error
    except DomainError as error:
        messages.error(request, f"{error.field}: {error.message}" if error.field else error.message)
    return redirect("job_detail", pk=job.pk)


@login_required
@require_POST
def job_resubmit(request: HttpRequest, pk: int) -> HttpResponse:
    """A submission by the caller of a job they see (services decide: members and above, who may read its env)."""
    job = _job_or_404(request, pk, detail=True)
    try:
        new = services.job_resubmit(actor=request.user, job=job).job
    except Forbidden as error:
        raise PermissionDenied(error.message) from error
    except DomainError as error:
        messages.error(request, error.message)
        return redirect("job_detail", pk=job.pk)
    messages.success(request, f"Resubmitted as job #{new.pk}.")
    return redirect("job_detail", pk=new.pk)


def _default_flavor(request: HttpRequest, project) -> str:
    quota = quota_selectors.quotas_for_user(request.user).filter(project=project).order_by("-guaranteed").first()
    if quota is not None:
        return quota.flavor.name
    flavor = quota_selectors.flavors().first()
    return flavor.name if flavor else "FLAVOR"


def _default_priority() -> str | None:
    try:
        return quota_selectors.default_priority_class().name
    except DomainError:
        return None


def _template_text(request: HttpRequest, project, launcher: str) -> str:
    return launcher_template(launcher, flavor=_default_flavor(request, project), priority=_default_priority())


def _submit_project(request: HttpRequest):
    """The current project, when the caller may submit there (members and above); viewers get a 403."""
    project = _current_project_or_none(request)
    if project is None:
        raise Http404("Choose a project first.")
    if not has_role(request.user, project, Role.MEMBER):
        raise PermissionDenied("Submitting jobs needs the member role.")
    return project


@login_required
def job_new(request: HttpRequest) -> HttpResponse:
    project = _submit_project(request)
    chooser = LauncherForm(request.GET or None)
    launcher = chooser.cleaned_data["launcher"] if chooser.is_valid() and chooser.cleaned_data["launcher"] else (
        Launcher.PYTORCH)
    if request.method == "POST":
        form = JobSpecForm(request.POST, request=request)
        if form.is_valid() and form.validated is not None:
            spec = dict(form.validated)
            target = spec.pop("project")
            try:
                job = services.job_submit(actor=request.user, project=target, spec=spec).job
            except DomainError as error:
                form.add_spec_error(error.field, error.message)
            else:
                messages.success(request, f"Job #{job.pk} {job.name} submitted.")
                return redirect("job_detail", pk=job.pk)
    else:
        initial = _template_text(request, project, launcher)
        source = request.GET.get("from", "")
        if is_digits(source):
            original = _job_or_404(request, int(source), detail=True)
            initial = spec_as_yaml(original, list(original.groups.all()),
                                   selectors.env_shown_to(request.user, original))
        form = JobSpecForm(initial={"spec": initial}, request=request)
    chooser = LauncherForm(initial={"launcher": launcher})
    return render(request, "jobs/job_new.html", {"project": project, "form": form, "chooser": chooser})


@login_required
def job_template(request: HttpRequest) -> HttpResponse:
    """The editor pre-filled with a launcher's template (htmx swaps it in when the launcher select changes)."""
    project = _submit_project(request)
    launcher = request.GET.get("launcher", Launcher.PYTORCH)
    form = JobSpecForm(initial={"spec": _template_text(request, project, launcher)}, request=request)
    return render(request, "jobs/_spec_editor.html", {"form": form})


@login_required
def queue(request: HttpRequest) -> HttpResponse:
    project = _current_project_or_none(request)
    show_all = request.GET.get("all") == "1" or project is None
    jobs = selectors.queue_for_user(request.user)
    if not show_all:
        jobs = jobs.filter(project=project)
    jobs = sorted(jobs, key=lambda j: (j.flavor.name, j.flavor_position is None, j.flavor_position or 0,
                                       j.submitted_at, j.pk))
    jobs = _with_eta(jobs)
    by_flavor: dict[str, list[Job]] = {}
    for job in jobs:
        job.workers = workers_of(job)  # an elastic job's bounds, for the template
        by_flavor.setdefault(job.flavor.name, []).append(job)
    return render(request, "jobs/queue.html", {
        "project": project, "show_all": show_all, "by_flavor": by_flavor, "total": len(jobs),
        "devices": sum(job.total_devices for job in jobs),
    })
