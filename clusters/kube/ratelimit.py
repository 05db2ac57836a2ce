"""Client-side token buckets and retry backoff. Clock, sleep and randomness are injectable for tests.

:class:`TokenBucket` holds a cluster's QPS within one process (embedded mode, the bench). With several worker
processes, :class:`RedisTokenBucket` keeps the same reservation semantics in one Redis hash per cluster, updated by
one Lua script, so the limit holds across every process. Neither imports a Redis client: the caller passes one.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

Clock = Callable[[], float]
Sleep = Callable[[float], None]

logger = logging.getLogger(__name__)


class Bucket(Protocol):
    qps: float
    burst: int

    def acquire(self) -> float: ...


class TokenBucket:
    """At most ``qps`` calls per second on average, ``burst`` at once. Thread-safe.

    Each :meth:`acquire` reserves the next free slot under the lock and sleeps outside it, so concurrent
    callers queue fairly and the long-run rate never exceeds ``qps`` (client-go's flowcontrol semantics).
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock = time.monotonic, sleep: Sleep = time.sleep):
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps = float(qps)
        self.burst = int(burst)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._stamp = clock()

    def reserve(self) -> float:
        """Take a token; return how long the caller must wait before using it."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
            self._stamp = now
            self._tokens -= 1.0
            if self._tokens >= 0:
                return 0.0
            return -self._tokens / self.qps

    def acquire(self) -> float:
        """Block until a token is available; return the time waited."""
        return _wait(self.reserve(), self._sleep)


def _wait(delay: float, sleep: Sleep) -> float:
    if delay > 0:
        sleep(delay)
    return delay


# Same arithmetic as TokenBucket.reserve, atomically on one hash {tokens, stamp}. The clock is Redis's own TIME
# (one clock for every host, no skew) unless a test passes ARGV[3]. The answer travels as a string: Redis would
# truncate a Lua number to an integer.
_RESERVE = """
local qps, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local state = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens, stamp = tonumber(state[1]) or burst, tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - stamp) * qps) - 1
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', tostring(math.max(now, stamp)))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / qps) + 60)
if tokens >= 0 then return '0' end
return tostring(-tokens / qps)
"""


class RedisTokenBucket:
    """The cluster's QPS/burst shared by every process using the same ``key`` (one per cluster).

    ``redis`` is a ``redis.Redis``. Should Redis fail, this process falls back to its own bucket (logged once):
    a rate limiter must not stop dispatch, and Redis down also stops the Celery workers that would exceed it.
    """

    def __init__(self, redis: Any, key: str, qps: float, burst: int, *, clock: Clock | None = None,
                 sleep: Sleep = time.sleep) -> None:
        self.qps = float(qps)
        self.burst = int(burst)
        self.key = key
        self._clock = clock  # None: Redis's clock
        self._sleep = sleep
        self._script = redis.register_script(_RESERVE)
        self._fallback = TokenBucket(qps, burst, clock=clock or time.monotonic, sleep=sleep)
        self._degraded = False

    def reserve(self) -> float:
        args: list[Any] = [self.qps, self.burst]
        if self._clock is not None:
            args.append(repr(self._clock()))
        try:
            delay = float(self._script(keys=[self.key], args=args))
        except Exception as exc:  # redis.RedisError and socket errors alike; the module imports no client
            if not self._degraded:
                logger.warning("rate limit bucket %s unavailable in Redis (%s): limiting this process only",
                               self.key, exc)
                self._degraded = True
            return self._fallback.reserve()
        self._degraded = False
        return delay

    def acquire(self) -> float:
        return _wait(self.reserve(), self._sleep)


@dataclass
class Backoff:
    """Exponential backoff with full jitter: attempt n waits uniform(0, min(cap, base * 2**n))."""

    base: float = 0.2
    cap: float = 10.0
    max_retries: int = 5
    rand: Callable[[], float] = field(default=random.random)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        ceiling = min(self.cap, self.base * (2 ** attempt))
        jittered = ceiling * self.rand()
        if retry_after is not None:
            return max(min(retry_after, self.cap), jittered)
        return jittered
