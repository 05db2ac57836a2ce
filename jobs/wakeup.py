"""Wake the scheduler loop at once after a submission, a completion or a quota change.

Embedded mode: a threading.Event in this process. With Redis: a list the scheduler blocks on (BLPOP), so a web
process or a Celery worker can wake a scheduler running elsewhere. Either way the loop also runs every few seconds,
so a lost wake-up only delays a decision.
"""

from __future__ import annotations

import functools
import logging
import threading

from django.conf import settings

logger = logging.getLogger(__name__)

WAKE_KEY = "tidal:scheduler:wake"
_local_event = threading.Event()


@functools.cache
def _redis(url: str):
    """One client (and connection pool) per process: a submission must not open a TCP connection to wake."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)


def wake_scheduler() -> None:
    _local_event.set()
    if settings.REDIS_URL:
        try:
            # One round trip; one pending wake-up is enough.
            _redis(settings.REDIS_URL).pipeline(transaction=False).rpush(WAKE_KEY, 1).ltrim(WAKE_KEY, -1, -1).execute()
        except Exception:  # a lost wake-up only delays the next cycle by the loop interval
            logger.warning("could not wake the scheduler through Redis", exc_info=True)


def wait_for_wakeup(timeout: float) -> bool:
    """Block until woken or `timeout` seconds pass. Returns True when woken."""
    if settings.REDIS_URL:
        try:
            woken = _redis(settings.REDIS_URL).blpop([WAKE_KEY], timeout=max(1, int(timeout))) is not None
            _local_event.clear()
            return woken
        except Exception:
            logger.warning("Redis unavailable for wake-ups; polling", exc_info=True)
    woken = _local_event.wait(timeout)
    _local_event.clear()
    return woken
