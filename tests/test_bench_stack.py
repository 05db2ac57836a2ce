"""The benchmarks' servers run as deployed whatever environment `make bench` gives them (bench/_stack.py)."""

import json
import sys

sys.path.insert(0, "bench")
from _stack import manage, server_env  # noqa: E402

SHOW = "import json; from django.conf import settings; " \
       "print(json.dumps([settings.DATABASES['default']['CONN_MAX_AGE'], settings.REDIS_URL]))"


def test_a_benchmarks_server_keeps_productions_persistent_connections_under_the_test_environment(monkeypatch):
    """`make bench` runs with the test suite's DATABASE_CONN_MAX_AGE=0: its web servers opened a PostgreSQL
    connection for every request (three times PostgreSQL's CPU of a tracking batch)."""
    monkeypatch.setenv("DATABASE_CONN_MAX_AGE", "0")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/9")
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # a benchmark is no test worker of its own Redis
    env = server_env("postgres://postgres@127.0.0.1:5432/tidal_bench_env", TIDAL_API_THROTTLE_RATE="1/min")
    assert env["TIDAL_API_THROTTLE_RATE"] == "1/min"
    assert json.loads(manage(env, "shell", "-c", SHOW).strip().splitlines()[-1]) == [60, ""]
    with_redis = server_env("postgres://postgres@127.0.0.1:5432/tidal_bench_env", REDIS_URL="redis://127.0.0.1:6379/9")
    assert json.loads(manage(with_redis, "shell", "-c", SHOW).strip().splitlines()[-1]) == [60, "redis://127.0.0.1:6379/9"]
