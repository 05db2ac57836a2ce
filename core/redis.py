"""The one way to reach Redis: a client (with its connection pool) per process and URL.

Every caller (scheduler wake-ups, the Kubernetes QPS bucket, readiness) shares it, so a request never opens a TCP
connection of its own. Returns None in embedded mode (no REDIS_URL): callers fall back to their in-process way.
"""

from __future__ import annotations

import functools

from django.conf import settings


@functools.cache
def _client_for(url: str):
    import redis

    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)


def redis_client():
    """The process's Redis client for settings.REDIS_URL, or None when Redis is not configured."""
    return _client_for(settings.REDIS_URL) if settings.REDIS_URL else None
