"""Wake-ups through Redis (a web process waking a scheduler elsewhere), against the real Redis (skipped without)."""

import os

import pytest

from core import wakeup
from core.redis import redis_client
from tests.settings import worker_redis_url

redis = pytest.importorskip("redis")
REDIS_URL = worker_redis_url(os.environ.get("TIDAL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))


@pytest.fixture
def through_redis(settings):
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    settings.REDIS_URL = REDIS_URL
    redis_client().delete(wakeup.WAKE_KEY)
    wakeup._local_event.clear()
    yield
    redis_client().delete(wakeup.WAKE_KEY)


def test_a_wake_up_reaches_the_waiting_scheduler_and_is_kept_once(through_redis):
    for _ in range(3):
        wakeup.wake_scheduler()
    assert redis_client().llen(wakeup.WAKE_KEY) == 1  # one pending wake-up is enough
    assert wakeup.wait_for_wakeup(5) is True  # woken by the pending wake-up, not by the timeout
    assert wakeup.wait_for_wakeup(1) is False  # consumed


def test_wake_ups_reuse_one_connection(through_redis):
    def connections_accepted() -> int:
        return redis.Redis.from_url(REDIS_URL).info("stats")["total_connections_received"]

    def opened_by_20_wake_ups() -> int:
        before = connections_accepted()
        for _ in range(20):
            wakeup.wake_scheduler()
        return connections_accepted() - before

    wakeup.wake_scheduler()  # the pool's first connection
    # One more for the counting client itself; a connection per wake-up would be 20 every time. The server counts
    # every client's connections, the other test worker's too, so the quietest of three rounds is the figure.
    assert min(opened_by_20_wake_ups() for _ in range(3)) <= 2
