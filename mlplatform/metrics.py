"""Prometheus metrics: request count and latency per view, and the /metrics endpoint.

With TIDAL_METRICS_TOKEN set, the endpoint answers only requests bearing it (`Authorization: Bearer <token>`).
Without one, it answers direct connections from METRICS_ALLOWED_IPS: never a request a proxy forwarded, since a proxy
on the same host makes every client look local. So it can stay on the public port without leaking internals; other
apps register their own metrics on the default registry.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest

from core.addresses import address_in, client_address, is_direct

REQUESTS = Counter("tidal_http_requests_total", "HTTP requests", ["method", "view", "status"])
LATENCY = Histogram(
    "tidal_http_request_duration_seconds",
    "HTTP request latency",
    ["method", "view"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
# Any other method a client makes up is counted as "other": each label value is a new series kept forever.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def method_label(method: str | None) -> str:
    return method if method in METHODS else "other"


class PrometheusMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        # The route name, not the path, so ids in URLs do not explode label cardinality.
        view = match.view_name if match else "unresolved"
        method = method_label(request.method)
        LATENCY.labels(method, view).observe(time.perf_counter() - started)
        REQUESTS.labels(method, view, str(response.status_code)).inc()
        return response


def metrics_view(request: HttpRequest) -> HttpResponse:
    token = settings.TIDAL_METRICS_TOKEN
    if token:
        header = request.headers.get("Authorization", "")
        if not hmac.compare_digest(header.encode(), f"Bearer {token}".encode()):
            return HttpResponseForbidden("metrics need the bearer token (TIDAL_METRICS_TOKEN)\n")
    elif not (is_direct(request) and address_in(client_address(request), settings.METRICS_ALLOWED_IPS)):
        return HttpResponseForbidden("metrics are not available from this address (set TIDAL_METRICS_TOKEN to read "
                                     "them through a proxy)\n")
    return HttpResponse(generate_latest(), content_type=CONTENT_TYPE_LATEST)
