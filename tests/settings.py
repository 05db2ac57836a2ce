"""Settings of the test suite and the benchmarks: production's (they run with DEBUG off), with the values a
throwaway server on plain HTTP needs where the environment leaves them unset.

Set here, in the environment, before the real settings read it, so `manage.py` subprocesses the tests start read
the same values (they inherit DJANGO_SETTINGS_MODULE and the environment).
"""

import os

TEST_DEFAULTS = {
    # A fixed Fernet key for kubeconfigs: production requires one (derived from SECRET_KEY only with DEBUG on).
    "TIDAL_ENCRYPTION_KEY": "ox_F4AgVyl6_ks-yOTz6zDfulItlbrPk7zVJXniOZ8U=",
    # The test client, the live server of the browser tests and the benchmarks' servers speak plain HTTP.
    "TIDAL_SSL_REDIRECT": "0",
    "SESSION_COOKIE_SECURE": "0",
}
for _name, _value in TEST_DEFAULTS.items():
    if not os.environ.get(_name):  # empty is unset, as for every reader of core.env
        os.environ[_name] = _value



def worker_redis_url(url: str) -> str:
    """`url` with the database of this pytest-xdist worker: the workers (`make test` runs two) share one Redis
    server, so each gets a database of its own (1, 2, ...; 0 stays a developer's), as pytest-django gives each its
    own test database."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    base, _, db = url.rpartition("/")
    return f"{base}/{1 + int(worker[2:])}" if worker.startswith("gw") and db.isdigit() else url


if os.environ.get("REDIS_URL"):
    os.environ["REDIS_URL"] = worker_redis_url(os.environ["REDIS_URL"])

from mlplatform.settings import *  # noqa: E402,F403
