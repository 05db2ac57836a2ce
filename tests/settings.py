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

# pytest-xdist's workers (`make test` runs two) share one Redis server: each gets a database of its own (1, 2, ...;
# 0 stays a developer's), as pytest-django gives each its own test database.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and os.environ.get("REDIS_URL"):
    _base, _, _db = os.environ["REDIS_URL"].rpartition("/")
    if _db.isdigit():
        os.environ["REDIS_URL"] = f"{_base}/{1 + int(_worker[2:])}"

from mlplatform.settings import *  # noqa: E402,F403
