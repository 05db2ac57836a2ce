"""Django's error handlers (`handler400`, `handler403`, `handler404`, `handler500` in `mlplatform.urls`) and the
limits on an address (its length, NUL characters).

Every page that refuses access or finds nothing answers inside the normal page frame, with the reason the code gave
and a way back; a bad request or a server error gets Django's own plain page.

Under /api/ every error is the API's JSON body, `{"error": {"code", "message", "fields"}}`. API views give it for
their own errors (DRF turns `Http404` and `PermissionDenied` into it inside the view); these handlers give it for
what happens outside a view or escapes one: an address that matches no view, what Django refuses before any view
runs (a Host header not in ALLOWED_HOSTS, a form body over DATA_UPLOAD_MAX_MEMORY_SIZE, too many parameters), an
address too long or holding a NUL character, and a server error. MLflow's paths (`/mlflow/<project>/api/` and
`ajax-api/`) answer MLflow's `{"error_code", "message"}` (tracking.mlflow.errors) for all of these alike, so its
client and UI read every refusal, a server error included, as they read MLflow's own.

Django shows its technical pages instead of these handlers while DEBUG is on, except for an address that matches no
view (`UnknownAddresses`): `make run` runs with DEBUG on, and a mistyped address there should look as it does in
production, not list the URL patterns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import unquote_plus

from django.conf import settings
from django.core.exceptions import DisallowedHost, RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import defaults
from django.views.decorators.csrf import requires_csrf_token
from rest_framework import exceptions

from core.errors import error_body
from core.parsers import BodyTooLarge
from tracking.mlflow import errors as mlflow_errors

API_PREFIX = "/api/"
MLFLOW_API = re.compile(r"/mlflow/[^/]+/(?:ajax-)?api(?:/|$)")  # tracking.mlflow.urls
FORBIDDEN_REASON = "You may not open this page."
NOT_FOUND_REASON = "There is no page at this address."
SERVER_ERROR_REASON = "The server failed to answer this request; the error is logged."
# Tidal refuses longer addresses itself, so the answer has the API's shape; gunicorn is started with room above it
# (--limit-request-line 8190) and answers longer request lines with its own page.
MAX_URI_BYTES = 4096


def reason_of(exception: Exception | None, default: str) -> str:
    """The message the code raised with, or `default`.

    Only a plain string counts: the URL resolver's `Resolver404` carries a dict of the patterns it tried, which is
    for developers, not for the page.
    """
    args = getattr(exception, "args", ())
    message = args[0] if args else None
    return message if isinstance(message, str) and message.strip() else default


def previous_page(request: HttpRequest) -> str | None:
    """The page the visitor came from, when it is on this site (never send them back to another host)."""
    referer = request.headers.get("Referer", "")
    if referer and url_has_allowed_host_and_scheme(referer, allowed_hosts={request.get_host()},
                                                   require_https=request.is_secure()):
        return referer
    return None


def _api_error(code: str, message: str, status: int) -> JsonResponse:
    """The API's one error body (for a missing object or a refusal, in DRF's own wording, as its views answer)."""
    return JsonResponse(error_body(code, message), status=status)


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX) or request.path == API_PREFIX.rstrip("/")


def _is_mlflow(request: HttpRequest) -> bool:
    return MLFLOW_API.match(request.path) is not None


def _mlflow_error(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse(mlflow_errors.body(code, message), status=status)


def _bad_request_error(exception: Exception | None) -> tuple[str, str, int]:
    """The code, message and status of what Django refused before a view (never the exception's own text: it
    names settings and hosts for developers)."""
    if isinstance(exception, RequestDataTooBig):
        too_large = BodyTooLarge(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        return too_large.default_code, str(too_large.detail), too_large.status_code
    if isinstance(exception, DisallowedHost):
        return "disallowed_host", "The Host header names a host this server does not answer for.", 400
    if isinstance(exception, TooManyFieldsSent):
        return ("too_many_fields",
                f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} parameters.", 400)
    return "bad_request", "The request is malformed.", 400


# requires_csrf_token: the frame holds forms (project switcher, sign out) that need a token even on an error page,
# as Django's own handlers do.
@requires_csrf_token
def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_mlflow(request):
        return _mlflow_error("PERMISSION_DENIED", str(exceptions.PermissionDenied.default_detail), 403)
    if _is_api(request):
        return _api_error("permission_denied", str(exceptions.PermissionDenied.default_detail), 403)
    return render(request, "403.html", {
        "reason": reason_of(exception, FORBIDDEN_REASON),
        "previous_page": previous_page(request),
    }, status=403)


@requires_csrf_token
def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_mlflow(request):
        return _mlflow_error("ENDPOINT_NOT_FOUND", "No MLflow endpoint at this address; see docs/mlflow.md.", 404)
    if _is_api(request):
        return _api_error("not_found", str(exceptions.NotFound.default_detail), 404)
    return render(request, "404.html", {
        "reason": reason_of(exception, NOT_FOUND_REASON),
        "previous_page": previous_page(request),
    }, status=404)


@requires_csrf_token
def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """What Django refuses before any view: a Host not allowed, a body or parameters over the limits (413 under
    /api/ for a body too large, as the JSON parser answers one)."""
    if _is_mlflow(request):
        _code, message, status = _bad_request_error(exception)
        return _mlflow_error("INVALID_PARAMETER_VALUE", message, status)
    if _is_api(request):
        return _api_error(*_bad_request_error(exception))
    return defaults.bad_request(request, exception)


@requires_csrf_token
def server_error(request: HttpRequest) -> HttpResponse:
    if _is_mlflow(request):
        return _mlflow_error("INTERNAL_ERROR", SERVER_ERROR_REASON, 500)
    if _is_api(request):
        return _api_error("server_error", SERVER_ERROR_REASON, 500)
    return defaults.server_error(request)


class AddressLimits:
    """Refuses an address Tidal cannot use before any other work: over MAX_URI_BYTES (414), or holding a NUL
    character in its path or query (400: PostgreSQL compares no text holding one, so a slug, a name or a filter
    with one answered 500 wherever it reached a query)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = len(request.get_full_path())
        if length > MAX_URI_BYTES:
            return _refuse(request, "uri_too_long", f"The address is {length:,} bytes long; at most {MAX_URI_BYTES:,}.",
                           414)
        if "\x00" in request.path or "\x00" in unquote_plus(request.META.get("QUERY_STRING", "")):
            return _refuse(request, "nul_character", "The address holds a NUL character (%00).", 400)
        return self.get_response(request)


def _refuse(request: HttpRequest, code: str, message: str, status: int) -> HttpResponse:
    if _is_mlflow(request):
        return _mlflow_error("INVALID_PARAMETER_VALUE", message, status)
    if _is_api(request):
        return _api_error(code, message, status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


class UnknownAddresses:
    """With DEBUG on, an address that matches no view gets the product's 404 page (the API's JSON body under
    /api/), as with DEBUG off, instead of Django's technical page of URL patterns; a 404 a view raises keeps
    Django's debugging page. CommonMiddleware, outside this one, still turns a missing final slash into a
    redirect."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.DEBUG:
            try:
                resolve(request.path_info, getattr(request, "urlconf", None))
            except Resolver404 as exc:
                return page_not_found(request, exc)
        return self.get_response(request)
