"""MLflow's error body, `{"error_code", "message"}`, for every refusal on the MLflow paths: the client reads the
code (e.g. `get_experiment_by_name` turns RESOURCE_DOES_NOT_EXIST into None), so Tidal's own shape would break it."""

from __future__ import annotations

from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response

from core.errors import (
    DATABASE_RETRY_AFTER_SECONDS,
    DATABASE_UNAVAILABLE,
    DATABASE_UNAVAILABLE_MESSAGE,
    DomainError,
    log_database_unavailable,
)
from tracking.artifacts.store import FULL, StoreUnavailable
from tracking.series.validate import BatchError

# MLflow's codes and the HTTP status its server answers each with (mlflow.exceptions.ERROR_CODE_TO_HTTP_STATUS).
STATUS = {
    "BAD_REQUEST": 400,
    "INVALID_PARAMETER_VALUE": 400,
    "RESOURCE_ALREADY_EXISTS": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "RESOURCE_DOES_NOT_EXIST": 404,
    "ENDPOINT_NOT_FOUND": 404,
    "REQUEST_LIMIT_EXCEEDED": 429,
    "INTERNAL_ERROR": 500,
    "TEMPORARILY_UNAVAILABLE": 503,
}


class MlflowError(Exception):
    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status or STATUS[code]


def invalid(message: str) -> MlflowError:
    return MlflowError("INVALID_PARAMETER_VALUE", message)


def not_found(message: str) -> MlflowError:
    return MlflowError("RESOURCE_DOES_NOT_EXIST", message)


def denied(message: str) -> MlflowError:
    return MlflowError("PERMISSION_DENIED", message)


def body(code: str, message: str) -> dict:
    return {"error_code": code, "message": message}


def as_mlflow_error(exc: Exception) -> MlflowError | None:
    """The MLflow error for what a view, the services or DRF raised; None for a bug, left to become a 500 (logged, and
    answered in MLflow's shape by mlplatform.errorpages.server_error)."""
    if isinstance(exc, MlflowError):
        return exc
    if isinstance(exc, DATABASE_UNAVAILABLE):
        return MlflowError("TEMPORARILY_UNAVAILABLE", DATABASE_UNAVAILABLE_MESSAGE)
    if isinstance(exc, StoreUnavailable):
        return MlflowError("TEMPORARILY_UNAVAILABLE", f"{exc} Try again shortly.")
    if isinstance(exc, OSError) and exc.errno in FULL:  # the artifact store's disk, or the spool's
        return MlflowError("TEMPORARILY_UNAVAILABLE", "The artifact store is out of space; try again later.")
    if isinstance(exc, BatchError):
        return invalid(str(exc))
    if isinstance(exc, DomainError):
        code = {"already_exists": "RESOURCE_ALREADY_EXISTS", "not_found": "RESOURCE_DOES_NOT_EXIST"}.get(exc.code)
        code = code or {403: "PERMISSION_DENIED", 404: "RESOURCE_DOES_NOT_EXIST"}.get(exc.status_code)
        # Anything else (a finished run refusing data included) is a bad value in MLflow's terms.
        # An upload over a size limit (413) or without its length (411) keeps its status.
        status = exc.status_code if exc.status_code in (411, 413) else None
        return MlflowError(code or "INVALID_PARAMETER_VALUE", exc.message, status=status)
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        return MlflowError("UNAUTHENTICATED", str(exc.detail))
    if isinstance(exc, exceptions.PermissionDenied):
        return denied(str(exc.detail))
    if isinstance(exc, exceptions.Throttled):
        return MlflowError("REQUEST_LIMIT_EXCEEDED", str(exc.detail))
    if isinstance(exc, exceptions.ParseError):
        return invalid(f"The request body is not valid JSON: {exc.detail}")
    if isinstance(exc, exceptions.NotFound | Http404):
        return not_found(str(exc))
    if isinstance(exc, exceptions.MethodNotAllowed):
        return MlflowError("BAD_REQUEST", str(exc.detail), status=405)
    if isinstance(exc, exceptions.APIException):
        return MlflowError("BAD_REQUEST", str(exc.detail), status=exc.status_code)
    return None


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's exception handler for the MLflow views (instead of core.errors.api_exception_handler)."""
    error = as_mlflow_error(exc)
    if error is None:
        return None
    headers = {}
    if error.code == "TEMPORARILY_UNAVAILABLE":  # as on the API (core.errors); MLflow's client retries a 503
        if isinstance(exc, DATABASE_UNAVAILABLE):
            log_database_unavailable(exc, context)
        headers["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    if error.code == "UNAUTHENTICATED":
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        headers["Retry-After"] = str(int(exc.wait) + 1)
    return Response(body(error.code, error.message), status=error.status, headers=headers)
