"""The fixtures of the jobs and clusters tests: a simulated inventory, and a Kubernetes cluster on kmock."""

from tests.clusters.conftest import _fresh_clients, kube, kube_inventory, resync, sleeps  # noqa: F401
from tests.jobs.conftest import cycle, inventory  # noqa: F401
