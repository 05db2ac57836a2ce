"""Rate limits per user (whichever of their tokens or their session they call with), or per client address when
anonymous.

A counter per caller and fixed window, one atomic increment in the cache (Redis in production), instead of DRF's
SimpleRateThrottle, which reads and rewrites the list of every request's timestamp in the window on every request
(at 3,000/min, a 3,000-entry pickle through Redis per request). A fixed window lets a caller spend up to twice its
rate across a window boundary, the usual trade of counter-based limits.
"""

from __future__ import annotations

import logging
import time

from django.core.cache import cache
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from core.addresses import client_address

logger = logging.getLogger(__name__)

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """'3000/min' -> (3000, 60)."""
    count, period = rate.split("/")
    return int(count), PERIODS[period[0]]


class PerUserRateThrottle(BaseThrottle):
    def allow_request(self, request, view) -> bool:
        scope = self.scope_of(request)
        # Read at request time so a changed setting (or a test's override) takes effect.
        rate = api_settings.DEFAULT_THROTTLE_RATES[scope]
        if rate is None:
            return True
        allowed, duration = parse_rate(rate)
        self.now = time.time()
        window = int(self.now // duration)
        self.window_ends = (window + 1) * duration
        try:
            return self._count(f"throttle_{self.ident_of(request)}_{window}", duration) <= allowed
        except Exception:  # the cache (Redis) is down: serve rather than fail every request; the limit is a guard
            logger.warning("throttle counter unavailable; request allowed", exc_info=True)
            return True

    def wait(self) -> float:
        return max(1.0, self.window_ends - self.now)

    def scope_of(self, request) -> str:
        """The DEFAULT_THROTTLE_RATES entry that limits this caller."""
        return "user" if request.user and request.user.is_authenticated else "anon"

    def ident_of(self, request) -> str:
        """Who is counted: requests with the same identity share one allowance. A user, not a token: a second token
        must not bring a fresh allowance. An address only as the proxies it came through are trusted to name it."""
        if request.user and request.user.is_authenticated:
            return f"user-{request.user.pk}"
        return f"addr-{client_address(request)}"

    @staticmethod
    def _count(key: str, duration: int) -> int:
        """This request's number in its window."""
        try:
            return cache.incr(key)
        except ValueError:  # the window's first request, unless another process created the key meanwhile
            if cache.add(key, 1, timeout=duration + 1):
                return 1
            return cache.incr(key)
