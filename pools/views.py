"""The Pools pages: every pool the user may see with its figures now, and one pool's chart (the last hour, 24 h or
7 days: `?span=`) and the training on its capacity (staff see every job; others their own projects' only:
selectors)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.utils import timezone

from jobs.models import Job
from pools import chart, selectors
from pools.panels import pool_panels


@login_required
def pools_page(request: HttpRequest) -> HttpResponse:
    rows = [selectors.figures(pool, request.user) for pool in selectors.pools_for_user(request.user)]
    return render(request, "pools/list.html", {"pools": rows})


@login_required
def pool_page(request: HttpRequest, name: str) -> HttpResponse:
    pool = selectors.pools_for_user(request.user).filter(name=name).first()
    if pool is None:
        raise Http404(f"No pool named {name!r} lent to your projects.")
    name_of_span = request.GET.get("span", "24h")
    span = selectors.SPANS.get(name_of_span)
    if span is None:
        return HttpResponseBadRequest(f"span: {name_of_span[:20]!r} is not a span of the chart; use one of "
                                      f"{', '.join(selectors.SPANS)}.", content_type="text/plain")
    figures = selectors.figures(pool, request.user, series=True, span=span)
    now = timezone.now()
    return render(request, "pools/detail.html", {
        "pool": figures, "lines": chart.lines(figures.series, now, span), "span": name_of_span,
        "spans": selectors.SPANS, "given_back": chart.given_back_path(figures.given_back, figures.series, now, span),
        "given_back_colour": chart.GIVEN_BACK, "width": chart.WIDTH, "height": chart.HEIGHT,
        "panels": pool_panels(request, pool)})


def job_panel(request: HttpRequest, job: Job) -> dict:
    """The job page's note that the job runs on capacity a pool lent (jobs.panels)."""
    return {"lent": selectors.lent_to(job)}

