"""Client-side token bucket and retry backoff. Clock, sleep and randomness are injectable for tests."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], float]
Sleep = Callable[[float], None]


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
        delay = self.reserve()
        if delay > 0:
            self._sleep(delay)
        return delay


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
