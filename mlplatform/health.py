"""Liveness (/healthz: the process answers) and readiness (/readyz: its database and Redis answer)."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

from core.redis import redis_client


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return "ok"


def _check_redis() -> str:
    redis_client().ping()
    return "ok"


def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _check_database}
    if settings.REDIS_URL:
        checks["redis"] = _check_redis
    results: dict[str, str] = {}
    for name, check in checks.items():
        try:
            results[name] = check()
        except Exception as error:  # noqa: BLE001 - any failure means "not ready", reported by name
            results[name] = f"error: {type(error).__name__}"
    ready = all(value == "ok" for value in results.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": results}, status=200 if ready else 503)
