"""The cluster's QPS shared across processes: RedisTokenBucket against the real Redis (skipped without one).

Every test uses its own key prefix, so parallel runs and other users of the Redis do not meet."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from clusters.kube.ratelimit import RedisTokenBucket

redis = pytest.importorskip("redis")
REDIS_URL = os.environ.get("TIDAL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def connect() -> redis.Redis:
    return redis.Redis.from_url(REDIS_URL, socket_timeout=5, socket_connect_timeout=1)


@pytest.fixture
def prefix() -> Iterator[str]:
    try:
        connect().ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    prefix = f"tidal-test:{uuid.uuid4().hex}:"
    yield prefix
    client = connect()
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def grants(buckets: list[RedisTokenBucket], now: list[float], calls: int, step: float) -> list[float]:
    """Round-robin reservations while a shared fake clock advances by `step`; the times tokens are granted."""
    out = []
    for i in range(calls):
        now[0] = i * step
        out.append(now[0] + buckets[i % len(buckets)].reserve())
    return out


def test_two_buckets_on_one_key_share_burst_and_rate(prefix) -> None:
    now = [0.0]
    a, b = (RedisTokenBucket(connect(), f"{prefix}gpu", qps=10, burst=4, clock=lambda: now[0]) for _ in range(2))
    granted = grants([a, b], now, 40, step=0.01)  # asked at 100/s, 10x the limit
    assert granted[:4] == [0.0, 0.01, 0.02, 0.03]  # the burst, whichever process asks
    for t in sorted(set(granted)):  # never more than burst + qps * t tokens by any time t
        assert sum(1 for g in granted if g <= t + 1e-9) <= 4 + 10 * t + 1e-6
    assert granted[-1] == pytest.approx((40 - 4) / 10)  # and no token lost: the limit is reached, not undershot


def test_concurrent_reservations_from_separate_connections_never_share_a_slot(prefix) -> None:
    """Atomicity: 8 threads, each with its own connection (as separate worker processes would be), reserve at one
    frozen instant; every reservation must get its own slot: burst at once, then one every 1/qps."""
    qps, burst, threads, each = 20.0, 5, 8, 25
    delays: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def worker() -> None:
        bucket = RedisTokenBucket(connect(), f"{prefix}gpu", qps=qps, burst=burst, clock=lambda: 1000.0)
        start.wait()
        mine = [bucket.reserve() for _ in range(each)]
        with lock:
            delays.extend(mine)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    expected = [0.0] * burst + [k / qps for k in range(1, threads * each - burst + 1)]
    assert sorted(delays) == pytest.approx(expected)


def test_redis_clock_path_paces_two_threads_at_the_limit(prefix) -> None:
    """Without an injected clock Redis's TIME is used. Only a lower bound is asserted: nothing may go faster."""
    buckets = [RedisTokenBucket(connect(), f"{prefix}gpu", qps=50, burst=5) for _ in range(2)]
    started = time.monotonic()
    pool = [threading.Thread(target=lambda b=b: [b.acquire() for _ in range(15)]) for b in buckets]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert time.monotonic() - started >= (30 - 5) / 50 - 0.02


def test_unreachable_redis_falls_back_to_the_process_bucket(caplog, closed_port) -> None:
    dead = redis.Redis(host="127.0.0.1", port=closed_port, socket_connect_timeout=0.2)
    bucket = RedisTokenBucket(dead, "tidal-test:dead", qps=10, burst=2, clock=lambda: 0.0, sleep=lambda s: None)
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    assert bucket.reserve() > 0  # still limited, by this process's own bucket
    assert sum("unavailable in Redis" in r.message for r in caplog.records) == 1  # logged once, not per call


def test_clients_built_with_redis_configured_share_the_clusters_bucket(prefix, kube_inventory, settings,
                                                                       monkeypatch) -> None:
    from clusters.backends.kubernetes import clients

    settings.REDIS_URL = REDIS_URL
    monkeypatch.setattr(clients, "BUCKET_KEY_PREFIX", prefix)
    cluster = kube_inventory["cluster"]
    cluster.qps, cluster.burst = 5.0, 3
    first = clients.build_client(cluster)
    second = clients.build_client(cluster)  # as another worker process would build it
    assert isinstance(first.bucket, RedisTokenBucket) and first.bucket.key == f"{prefix}{cluster.pk}"
    assert [first.bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert second.bucket.reserve() > 0  # the burst is spent for both
    first.close()
    second.close()
    settings.REDIS_URL = ""
    local = clients.build_client(cluster)
    assert not isinstance(local.bucket, RedisTokenBucket)  # embedded mode: the in-process bucket
    local.close()
