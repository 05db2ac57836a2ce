"""core.leases: at most `limit` holders of a key, given back on release, lapsing on their own when a holder dies;
shared by every process through Redis (when the suite has one), else counted per process."""

from __future__ import annotations

import logging
import time

import pytest

from core import leases
from core.redis import redis_client


def test_a_key_has_at_most_limit_holders_and_a_released_place_is_free_again() -> None:
    first = leases.acquire("tidal:test-leases:a", 2, 60, shared=False)
    leases.acquire("tidal:test-leases:a", 2, 60, shared=False)
    with pytest.raises(leases.Refused) as refused:
        leases.acquire("tidal:test-leases:a", 2, 60, shared=False)
    assert 55 <= refused.value.retry_after <= 60  # when the first holder is expected to give its place back
    assert leases.acquire("tidal:test-leases:b", 2, 60, shared=False)  # another key counts apart
    first.release()
    first.release()  # twice: nothing more
    third = leases.acquire("tidal:test-leases:a", 2, 60, shared=False)
    with pytest.raises(leases.Refused):
        leases.acquire("tidal:test-leases:a", 2, 60, shared=False)
    third.release()


def test_a_place_whose_holder_died_lapses_on_its_own(monkeypatch) -> None:
    monkeypatch.setattr(leases, "SLACK", 0.1)
    leases.acquire("tidal:test-leases:dead", 1, 0.1, shared=False)  # never released
    with pytest.raises(leases.Refused):
        leases.acquire("tidal:test-leases:dead", 1, 0.1, shared=False)
    time.sleep(0.25)
    assert leases.acquire("tidal:test-leases:dead", 1, 0.1, shared=False)


def test_with_redis_the_count_is_shared_by_every_process(settings, monkeypatch) -> None:
    if redis_client() is None:
        pytest.skip("no REDIS_URL: embedded mode counts per process (the test above)")
    key = "tidal:test-leases:shared"
    redis_client().delete(key)
    monkeypatch.setattr(leases, "SLACK", 0.2)
    held = leases.acquire(key, 1, 0.2)
    assert held.shared
    leases.forget_local()  # another process knows nothing of it...
    with pytest.raises(leases.Refused):
        leases.acquire(key, 1, 0.2)  # ...and is refused all the same
    held.release()
    leases.acquire(key, 1, 0.2)  # never released: it lapses on Redis's clock
    time.sleep(0.5)
    leases.acquire(key, 1, 0.2).release()
    redis_client().delete(key)


def test_should_redis_fail_each_process_counts_its_own(settings, caplog, monkeypatch) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens there
    monkeypatch.setattr(leases, "_warned", type(leases._warned)())
    with caplog.at_level(logging.WARNING, logger="core.leases"):
        first = leases.acquire("tidal:test-leases:down", 1, 60)
        with pytest.raises(leases.Refused):
            leases.acquire("tidal:test-leases:down", 1, 60)
    assert not first.shared
    assert [r.message for r in caplog.records if "fall back" in r.message] and len(caplog.records) == 1
    first.release()
