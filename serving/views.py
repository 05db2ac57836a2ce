"""The Services pages: the services of the user's projects, one service's replicas and load over 24 h with its
scale events, and the pool page's panel of the pool's services."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from pools import chart
from pools.models import Pool
from serving import selectors
from serving.models import Service, ServiceSample

MAX_POINTS = 720  # a point every 2 minutes over 24 h: the chart's width


@login_required
def services_page(request: HttpRequest) -> HttpResponse:
    return render(request, "serving/list.html", {"services": selectors.services_for_user(request.user)})


def _thinned(samples: list[ServiceSample]) -> list[ServiceSample]:
    """At most MAX_POINTS samples, evenly picked, the last one kept (a tick every 5 s is 17,280 a day)."""
    step = max(1, -(-len(samples) // MAX_POINTS))
    kept = samples[::step]
    return kept if not samples or kept[-1] is samples[-1] else [*kept, samples[-1]]


def _charts(service: Service, samples: list[ServiceSample]) -> dict[str, Any]:
    now = timezone.now()
    replicas = chart.draw(samples, now, [
        ("desired", "Desired", "#1f6feb", lambda s: s.replicas),
        ("ready", "Ready", "#2da44e", lambda s: s.ready)], service.max_replicas, lambda s: s.at)
    target = service.target_per_replica
    with_value = [s for s in samples if s.value is not None]
    top = max([s.value for s in with_value] + [target * s.replicas for s in samples] + [target])
    load = chart.draw(with_value, now, [
        ("metric", "Metric", "#8250df", lambda s: s.value),
        ("capacity", "Target x desired replicas", "#9a6700", lambda s: target * s.replicas)], top, lambda s: s.at)
    return {"replica_lines": replicas, "load_lines": load, "load_top": top}


@login_required
def service_page(request: HttpRequest, pk: int) -> HttpResponse:
    service = selectors.services_for_user(request.user).filter(pk=pk).first()
    if service is None:
        raise Http404("No such service in your projects.")
    samples, events = selectors.history(service)
    return render(request, "serving/detail.html", {
        "service": service, "events": events, "width": chart.WIDTH, "height": chart.HEIGHT,
        **_charts(service, _thinned(samples))})


def pool_panel(request: HttpRequest, pool: Pool) -> dict[str, Any]:
    """The pool page's services: every service's devices count (they are the pool's demand), the caller's own
    services by name."""
    mine = set(selectors.services_for_user(request.user).filter(pool=pool).values_list("pk", flat=True))
    rows = list(selectors.pool_services(pool))
    return {"services": [s for s in rows if s.pk in mine or request.user.is_staff],
            "others": sum(1 for s in rows if s.pk not in mine and not request.user.is_staff),
            "devices": sum(s.devices for s in rows)}
