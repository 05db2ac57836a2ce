"""Prometheus metrics: request count and latency per view, and the /metrics endpoint.

The endpoint answers only addresses in METRICS_ALLOWED_IPS or a request bearing METRICS_TOKEN, so it can stay on the
public port without leaking internals; other apps register their own metrics on the default registry.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest

REQUESTS = Counter("tidal_http_requests_total", "HTTP requests", ["method", "view", "status"])
LATENCY = Histogram(
    "tidal_http_request_duration_seconds",
    "HTTP request latency",
    ["method", "view"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


class PrometheusMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        # The route name, not the path, so ids in URLs do not explode label cardinality.
        view = match.view_name if match else "unresolved"
        LATENCY.labels(request.method, view).observe(time.perf_counter() - started)
        REQUESTS.labels(request.method, view, str(response.status_code)).inc()
        return response


def _allowed(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(header, f"Bearer {token}"):
        return True
    return request.META.get("REMOTE_ADDR") in settings.METRICS_ALLOWED_IPS


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        return HttpResponseForbidden("metrics are not available from this address\n")
    return HttpResponse(generate_latest(), content_type=CONTENT_TYPE_LATEST)
