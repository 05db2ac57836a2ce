"""Wake the scheduler loop at once after a submission, a completion or a quota change.

Embedded mode: a threading.Event in this process. With Redis: a list the scheduler blocks on (BLPOP), so a web
process or a Celery worker can wake a scheduler running elsewhere. Either way the loop also runs every few seconds,
so a lost wake-up only delays a decision.
"""

from __future__ import annotations

import logging
import threading

from core.redis import redis_client

logger = logging.getLogger(__name__)

WAKE_KEY = "tidal:scheduler:wake"
BLOCK_LIMIT = 4  # seconds; the Redis client's socket timeout is 5
_local_event = threading.Event()


def wake_scheduler() -> None:
    _local_event.set()
    client = redis_client()
    if client is not None:
        try:
            # One round trip; one pending wake-up is enough.
            client.pipeline(transaction=False).rpush(WAKE_KEY, 1).ltrim(WAKE_KEY, -1, -1).execute()
        except Exception:  # a lost wake-up only delays the next cycle by the loop interval
            logger.warning("could not wake the scheduler through Redis", exc_info=True)


def wait_for_wakeup(timeout: float) -> bool:
    """Block until woken or `timeout` seconds pass. Returns True when woken."""
    client = redis_client()
    if client is not None:
        try:
            # Below the client's socket timeout, which would otherwise cut a long blocking pop short.
            woken = client.blpop([WAKE_KEY], timeout=min(max(1, int(timeout)), BLOCK_LIMIT)) is not None
            _local_event.clear()
            return woken
        except Exception:
            logger.warning("Redis unavailable for wake-ups; polling", exc_info=True)
    woken = _local_event.wait(timeout)
    _local_event.clear()
    return woken
