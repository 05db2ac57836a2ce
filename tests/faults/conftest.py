from tests.jobs.conftest import cycle, inventory  # noqa: F401
