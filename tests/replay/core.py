"""Skip marker for tests that need the production scheduler core (jobs.scheduling.run_cycle)."""

import pytest

try:
    from jobs.scheduling import run_cycle  # noqa: F401

    HAVE_CORE = True
except ImportError:
    HAVE_CORE = False

needs_core = pytest.mark.skipif(not HAVE_CORE, reason="jobs.scheduling.run_cycle is not there yet")
