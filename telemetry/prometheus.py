"""Prometheus' HTTP query API, as the reader uses it: one range query, answered or refused with a reason."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

# Prometheus refuses a range query of more than 11,000 points per series.
MAX_POINTS = 11_000


class PrometheusError(Exception):
    """Prometheus did not answer the query (down, refused, timed out, an error status): nothing was read."""


def query_range(url: str, query: str, start: int, end: int, step: int, *, token: str = "",
                timeout: float = 10.0) -> list[dict[str, Any]]:
    """The matrix (`data.result`) of `query` over [start, end] (Unix seconds, both included) every `step` seconds.
    POSTed as a form, so a long query never meets a URL length limit."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.post(f"{url}/api/v1/query_range", headers=headers, timeout=timeout,
                              data={"query": query, "start": str(start), "end": str(end), "step": str(step)})
    except httpx.HTTPError as exc:
        raise PrometheusError(f"Prometheus at {url} could not be reached: {exc}") from None
    try:
        # orjson: the answer for 10,000 GPUs is tens of megabytes, which the standard json decodes 3-4x slower.
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        raise PrometheusError(f"Prometheus at {url} answered {response.status_code} without JSON") from None
    if not isinstance(body, dict):
        raise PrometheusError(f"Prometheus at {url} answered {response.status_code} with JSON that is not an object")
    if response.status_code != 200 or body.get("status") != "success":
        raise PrometheusError(f"Prometheus at {url} answered {response.status_code}: "
                              f"{str(body.get('error') or body)[:300]}")
    data = body.get("data") or {}
    if data.get("resultType") != "matrix":
        raise PrometheusError(f"Prometheus at {url} answered a {data.get('resultType')!r}, not a matrix")
    return list(data.get("result") or [])
