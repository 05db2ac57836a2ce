from tests.costs.conftest import prices  # noqa: F401  (fixture)
from tests.jobs.conftest import cycle, inventory  # noqa: F401  (the simulated cluster's fixtures)
