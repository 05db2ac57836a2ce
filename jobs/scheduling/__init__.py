"""Tidal's pure scheduler core: `run_cycle(snapshot, policy)` and the plain data it reads and returns.

No Django, ORM or Kubernetes imports anywhere in this package: production, the embedded demo and trace replay
all call the same function.

The modules below load compiled to C when `make install` compiled them from these very sources (compiled.py;
`COMPILED` tells which): the same code, about twice as fast (docs/performance.md).
"""

from .compiled import compiled_dir

_compiled = compiled_dir()
if _compiled is not None:
    __path__.insert(0, _compiled)  # noqa: F821 (a package's own path, set by the import system)
COMPILED = _compiled is not None

from .cycle import run_cycle
from .feasibility import Feasibility, never_fits
from .forecast import (
    Estimate,
    RuntimeShares,
    arrival_rates,
    estimate_starts,
    forecast,
    forecast_steps,
    runtime_shares,
)
from .model import (
    PHASES,
    Admit,
    Arrival,
    ArrivalRate,
    Assignment,
    CycleResult,
    Elastic,
    EndedUse,
    Grow,
    Node,
    PendingJob,
    Policy,
    Pool,
    Preempt,
    Project,
    Quota,
    ReplicaGroup,
    Reservation,
    RunningJob,
    Shrink,
    Snapshot,
    Topology,
    Wait,
    node_key,
    split_node_key,
)
from .state import RunningUsage

__all__ = [
    "COMPILED",
    "PHASES",
    "Admit",
    "Arrival",
    "ArrivalRate",
    "Assignment",
    "CycleResult",
    "Elastic",
    "EndedUse",
    "Grow",
    "Estimate",
    "Node",
    "PendingJob",
    "Policy",
    "Pool",
    "Preempt",
    "Project",
    "Quota",
    "ReplicaGroup",
    "Reservation",
    "RunningJob",
    "RunningUsage",
    "RuntimeShares",
    "Shrink",
    "Snapshot",
    "Topology",
    "Wait",
    "Feasibility",
    "arrival_rates",
    "estimate_starts",
    "forecast",
    "forecast_steps",
    "never_fits",
    "node_key",
    "run_cycle",
    "runtime_shares",
    "split_node_key",
]
