"""Django's 403 and 404 handlers (`handler403`, `handler404` in `mlplatform.urls`): every page that refuses access or
finds nothing answers inside the normal page frame, with the reason the code gave and a way back.

API views never get here for their own errors: DRF turns `Http404` and `PermissionDenied` into the JSON error body
inside the view. Only an address under /api/ that matches no view reaches these handlers, and it gets that same JSON
body, not a page.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import requires_csrf_token
from rest_framework import exceptions

from core.errors import error_body

API_PREFIX = "/api/"
FORBIDDEN_REASON = "You may not open this page."
NOT_FOUND_REASON = "There is no page at this address."


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
    """The API's one error body, with DRF's own wording, as its views answer a missing object or a refusal."""
    return JsonResponse(error_body(code, message), status=status)


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


# requires_csrf_token: the frame holds forms (project switcher, sign out) that need a token even on an error page,
# as Django's own handlers do.
@requires_csrf_token
def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return _api_error("permission_denied", str(exceptions.PermissionDenied.default_detail), 403)
    return render(request, "403.html", {
        "reason": reason_of(exception, FORBIDDEN_REASON),
        "previous_page": previous_page(request),
    }, status=403)


@requires_csrf_token
def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return _api_error("not_found", str(exceptions.NotFound.default_detail), 404)
    return render(request, "404.html", {
        "reason": reason_of(exception, NOT_FOUND_REASON),
        "previous_page": previous_page(request),
    }, status=404)
