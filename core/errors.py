"""Domain errors with stable codes, and the one DRF exception handler that turns every 4xx into the same body:

    {"error": {"code": "...", "message": "...", "fields": {"field": ["reason"]}}}
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.db.models import ProtectedError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from core.parsers import BodyTooLarge

logger = logging.getLogger(__name__)

# The database unreachable (restarting, failing over, out of connections): the request may succeed in a moment.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
DATABASE_UNAVAILABLE_MESSAGE = "The database is unavailable; try again shortly."
# How long a client waits before it retries while the database is unreachable (a restart or a failover takes
# seconds; the SDK's spool and the CLI retry on 503).
DATABASE_RETRY_AFTER_SECONDS = 5


class DomainError(Exception):
    """A broken business rule. Services raise it; the API maps it to a 4xx."""

    code = "invalid"
    status_code = status.HTTP_400_BAD_REQUEST

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        if code:
            self.code = code


class InvalidTransition(DomainError):
    code = "invalid_transition"
    status_code = status.HTTP_409_CONFLICT


class QuotaExceeded(DomainError):
    code = "quota_exceeded"


class Conflict(DomainError):
    code = "conflict"
    status_code = status.HTTP_409_CONFLICT


class Forbidden(DomainError):
    code = "permission_denied"
    status_code = status.HTTP_403_FORBIDDEN


class NotFound(DomainError):
    code = "not_found"
    status_code = status.HTTP_404_NOT_FOUND


class TooManyRequests(DomainError):
    """A limit on concurrent use (e.g. log streams) is reached: 429 with Retry-After."""

    code = "throttled"
    status_code = status.HTTP_429_TOO_MANY_REQUESTS

    def __init__(self, message: str, *, retry_after: float, code: str | None = None):
        super().__init__(message, code=code)
        self.retry_after = retry_after


def flatten_errors(detail: Any) -> dict[str, list[str]]:
    """DRF validation details as {field: [reasons]}; nested fields become dotted paths."""
    fields: dict[str, list[str]] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if isinstance(key, int):  # list serializers report items by index
                    walk(f"{prefix}[{key}]", inner)
                elif key == "non_field_errors" and prefix:  # a nested object's own error belongs to its field
                    walk(prefix, inner)
                else:
                    walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list) and value and not all(isinstance(v, str) for v in value):
            for index, inner in enumerate(value):
                if inner:
                    walk(f"{prefix}[{index}]" if prefix else str(index), inner)
        else:
            reasons = value if isinstance(value, list) else [value]
            fields.setdefault(prefix or "non_field_errors", []).extend(str(r) for r in reasons)

    walk("", detail)
    return fields


def error_body(code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def unsupported_media_type(request: Any) -> str:
    """The 415's message: what the body was sent as (DRF's own says `Unsupported media type ""` of a body sent
    without a Content-Type) and what the endpoint reads instead."""
    reads = ", ".join(dict.fromkeys(parser.media_type for parser in request.parsers))
    if not request.content_type:
        return f"The request has a body but no Content-Type header; this endpoint reads {reads}."
    return f"This endpoint does not read {request.content_type.split(';')[0].strip()!r} bodies; it reads {reads}."


def log_database_unavailable(exc: Exception, context: dict) -> None:
    logger.warning("database unavailable during %s: %s", type(context.get("view")).__name__, exc)


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, DATABASE_UNAVAILABLE):
        # The request may succeed in a moment, so 503 with Retry-After, which clients retry, not a 500. The driver's
        # message stays in the log.
        log_database_unavailable(exc, context)
        return Response(error_body("database_unavailable", DATABASE_UNAVAILABLE_MESSAGE),
                        status=status.HTTP_503_SERVICE_UNAVAILABLE,
                        headers={"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)})
    if isinstance(exc, DomainError):
        fields = {exc.field: [exc.message]} if exc.field else {}
        response = Response(error_body(exc.code, exc.message, fields), status=exc.status_code)
        if isinstance(exc, TooManyRequests):
            response["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
        return response
    if isinstance(exc, ProtectedError):
        return Response(
            error_body("protected", "This object is still referenced (for example by jobs) and cannot be deleted."),
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, RequestDataTooBig):
        exc = BodyTooLarge(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = flatten_errors(exc.detail)
        first = next(iter(fields.items()))
        message = f"{first[0]}: {first[1][0]}" if first[0] != "non_field_errors" else first[1][0]
        response.data = error_body("invalid", message, fields)
    elif isinstance(exc, exceptions.UnsupportedMediaType):
        response.data = error_body("unsupported_media_type", unsupported_media_type(context["request"]))
    elif isinstance(exc, exceptions.APIException):
        detail = exc.detail
        code = detail.code if hasattr(detail, "code") else exc.default_code
        response.data = error_body(str(code), str(detail))
    return response
