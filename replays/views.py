"""The admin what-if page: replay real history as configured and with one proposed change, show who gains and
who loses, and save the change only when the admin presses "Apply this change".

Mounted under the ReplayRun admin (see replays/admin.py), so every view is staff only (admin_site.admin_view).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.errors import DomainError
from replays import selectors, services
from replays.forms import WhatIfForm
from replays.models import ReplayRun, RunKind

APPLY_PERMISSION = {"quota": "quotas.change_quota", "priority": "quotas.change_priorityclass"}


def _context(site: AdminSite, request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {**site.each_context(request), "title": "What-if: try a change on real history", **extra}


def _run(pk: int) -> ReplayRun:
    run = selectors.run_by_id(pk)
    if run is None or run.kind != RunKind.WHATIF:
        raise Http404("No such what-if run.")
    return run


def difference_rows(run: ReplayRun) -> list[dict[str, Any]]:
    """One row per project (then ALL) of compare(current, proposed): the figures counted per job (waits, JCT,
    preemptions), which read the same whatever flavors the jobs used. Figures in devices are per flavor
    (flavor_groups), never added across flavors."""
    if not run.comparison:
        return []
    cmp = run.comparison[0]
    return [{"project": name, "verdict": r["verdict"],
             **{key: r[key] for key in ("wait_mean", "wait_p95", "jct_mean", "preemptions")}}
            for name, r in [*cmp["projects"].items(), ("ALL", cmp["overall"])]]


def _shown(row: dict[str, Any]) -> bool:
    """A (project, flavor) with a guarantee or jobs on either side; the rest (another organization's quota of 0,
    say) would only fill the table."""
    return any(row[key]["a"] or row[key]["b"] for key in ("guarantee", "jobs"))


def flavor_groups(run: ReplayRun) -> list[dict[str, Any]]:
    """Per flavor: its devices, the sum of guarantees and the utilization, current and proposed, and its
    projects' rows (guarantee, devices used, share of the flavor, guarantee met, waits of their jobs of the
    flavor). Empty for a run stored before per-flavor figures existed."""
    by_flavor = run.comparison[0].get("by_flavor") if run.comparison else None
    if not by_flavor:
        return []
    groups = []
    for flavor, total in by_flavor["flavors"].items():
        rows = [{"project": project, **flavors[flavor]} for project, flavors in by_flavor["projects"].items()
                if flavor in flavors and _shown(flavors[flavor])]
        groups.append({"flavor": flavor, **total, "rows": rows})
    return groups


def not_run(side: dict[str, Any], project: str) -> int:
    """How many of the project's jobs (ALL: of every project) a replay left unfinished or never started."""
    row = side["overall"] if project == "ALL" else side["projects"].get(project, {})
    return int(row.get("unfinished") or 0) + int(row.get("never_started") or 0)


def cost_table(run: ReplayRun) -> dict[str, Any] | None:
    """What the replayed jobs cost per project (then ALL) at today's prices, current and proposed and the
    difference; None for a run stored before replays were priced. A row whose two sides did not run the same jobs
    to their end within the replay says how many each left undone (`not_run`): its difference is work not run,
    not a saving (or work run, not a loss)."""
    cost = run.comparison[0].get("cost") if run.comparison else None
    if not cost:
        return None
    current, proposed = run.summary[0], run.summary[1]
    rows = []
    for name, row in [*cost["projects"].items(), ("ALL", cost["total"])]:
        undone = {"a": not_run(current, name), "b": not_run(proposed, name)}
        rows.append({"project": name, **row, "not_run": undone if undone["a"] != undone["b"] else None})
    unpriced = {side["name"]: side["cost"] for side in run.summary if side["cost"]["unpriced_device_hours"]}
    return {"currency": cost["currency"], "priced_at": datetime.fromisoformat(cost["priced_at"]), "rows": rows,
            "unpriced": unpriced}


def whatif(request: HttpRequest, site: AdminSite) -> HttpResponse:
    form = WhatIfForm(request.POST or None)
    # A change with warnings (a guarantee above the hardware) is shown again with them until "replay it anyway".
    if request.method == "POST" and form.ready and form.change is not None:
        try:
            run = services.whatif_create(actor=request.user, days=form.cleaned_data["days"], change=form.change)
        except DomainError as exc:
            form.add_error("days" if exc.field in ("days", "source") else None, exc.message)
        else:
            return redirect(reverse("admin:replays_whatif_result", args=[run.pk]))
    recent = selectors.whatif_runs()[:10]
    return render(request, "replays/whatif_form.html", _context(site, request, form=form, recent=recent))


def whatif_result(request: HttpRequest, pk: int, site: AdminSite) -> HttpResponse:
    run = _run(pk)
    kind = run.change.get("kind")
    can_apply = (run.status == "succeeded" and run.applied_at is None and kind in APPLY_PERMISSION
                 and request.user.has_perm(APPLY_PERMISSION[kind]))
    context = _context(
        site, request, run=run, rows=difference_rows(run), flavors=flavor_groups(run), costs=cost_table(run),
        cmp=run.comparison[0] if run.comparison else None,
        can_apply=can_apply, percent=round(run.progress * 100),
        env_setting=services.env_setting(run.change["field"], run.change["value"]) if kind == "policy" else "",
        report_url=reverse("replay-report", kwargs={"pk": run.pk}) if run.status == "succeeded" else "")
    return render(request, "replays/whatif_result.html", context)


@require_POST
def whatif_apply(request: HttpRequest, pk: int, site: AdminSite) -> HttpResponse:
    run = _run(pk)
    permission = APPLY_PERMISSION.get(run.change.get("kind", ""))
    if permission and not request.user.has_perm(permission):
        raise PermissionDenied
    try:
        done = services.whatif_apply(actor=request.user, run_row=run)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, done)
    return redirect(reverse("admin:replays_whatif_result", args=[run.pk]))
