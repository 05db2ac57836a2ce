"""Counted leases: at most `limit` holders of a key at once, across every process (Redis) or within this one.

A lease is taken for as long as its holder expects to keep it (`hold` seconds, e.g. a log stream's time bound) and
given back with `release()`; one whose holder died without releasing it (a worker killed mid-stream) lapses
`SLACK` seconds after that, so a crashed process never keeps a place for ever. Shared leases live in a Redis
sorted set per key (member: the lease, score: when it lapses), taken and counted by one Lua script on Redis's own
clock, so every process agrees; without Redis (embedded mode, one process) or should Redis fail (logged once),
each process counts its own.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass

from core.redis import redis_client

logger = logging.getLogger(__name__)

SLACK = 30.0  # seconds a lease outlives its expected hold before it lapses on its own

# KEYS[1]: the set; ARGV: limit, seconds until the lease lapses, the lease's id.
# Returns {1, ""} when taken, else {0, seconds until the first lease of the key lapses}.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[1], math.ceil(tonumber(last[2]) * 1000))
  return {1, ''}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tostring(tonumber(first[2]) - now)}
"""


class Refused(Exception):
    """Every place of the key is taken; `retry_after`: seconds until the first of them is expected back."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"no place left; retry in {retry_after:.0f} s")
        self.retry_after = retry_after


@dataclass
class Lease:
    key: str
    id: str
    shared: bool
    released: bool = False

    def release(self) -> None:
        """Give the place back (again: nothing)."""
        if self.released:
            return
        self.released = True
        if self.shared:
            try:
                redis_client().zrem(self.key, self.id)
            except Exception:  # noqa: BLE001  (Redis gone: the lease lapses on its own)
                logger.warning("could not release lease %s; it lapses on its own", self.key)
        else:
            _local.release(self.key, self.id)


class _LocalLeases:
    """This process's leases: key -> {lease id: when it lapses (monotonic)}."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, dict[str, float]] = {}

    def acquire(self, key: str, limit: int, lapse: float, lease_id: str) -> None:
        now = time.monotonic()
        with self._lock:
            held = {i: until for i, until in self._held.get(key, {}).items() if until > now}
            self._held[key] = held
            if len(held) >= limit:
                raise Refused(min(held.values()) - now)
            held[lease_id] = now + lapse

    def release(self, key: str, lease_id: str) -> None:
        with self._lock:
            self._held.get(key, {}).pop(lease_id, None)

    def clear(self) -> None:
        with self._lock:
            self._held.clear()


_local = _LocalLeases()
_warned = threading.Event()


def acquire(key: str, limit: int, hold: float, *, shared: bool = True) -> Lease:
    """A place among `limit` under `key` for about `hold` seconds, shared by every process when Redis is
    configured (`shared`), else this process's; Refused when none is left, with the seconds until one is expected
    back (the lapse slack left out: a holder normally releases at the end of its hold)."""
    lease = Lease(key, uuid.uuid4().hex, shared=shared and redis_client() is not None)
    if lease.shared:
        try:
            taken, wait = redis_client().eval(_ACQUIRE, 1, key, limit, hold + SLACK, lease.id)
        except Exception as exc:  # noqa: BLE001  (Redis unavailable: count in this process rather than refuse)
            if not _warned.is_set():
                _warned.set()
                logger.warning("leases fall back to this process's count: Redis failed (%s)", exc)
            lease.shared = False
        else:
            if not int(taken):
                raise Refused(max(1.0, float(wait) - SLACK))
            return lease
    try:
        _local.acquire(key, limit, hold + SLACK, lease.id)
    except Refused as refused:
        raise Refused(max(1.0, refused.retry_after - SLACK)) from None
    return lease


def forget_local() -> None:
    """Drop this process's leases (tests)."""
    _local.clear()
