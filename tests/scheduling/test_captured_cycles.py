"""The plain mode on captured cycles: snapshots the production policy saw while replaying a real trace (the Philly
day at 704 GPUs) are run again with every acceleration off and must decide the same, explanations included.

The random clusters of test_properties.py try the rules' corners; these are the cycles a real workload produces
(bursts of small jobs, big gangs behind them, borrowing and reclaim between eleven virtual clusters), captured as
the replay runs rather than stored.
"""

from dataclasses import replace

import pytest

from jobs.scheduling import CycleResult, Policy, RunningUsage, Snapshot, forecast, run_cycle
from replay.engine import run_replay
from replay.paths import traces_dir
from replay.policies import get_policy
from replay.scenarios import PHILLY_DAY, philly_scenario

pytestmark = pytest.mark.skipif(not (traces_dir() / PHILLY_DAY).exists(), reason="shared traces not present")

EVERY = 10  # one cycle in EVERY is captured and run again in both modes with explanations on
RUN = 3  # and so are the cycles right after it: runs of consecutive cycles, each after the one before took effect


def test_captured_cycles_of_a_real_trace_decide_the_same_in_the_plain_mode():
    scn = philly_scenario(scale=0.25, trace_file=PHILLY_DAY)
    usage = RunningUsage()
    seen = 0
    snapshots: list[tuple[Snapshot, Policy]] = []
    # The replay's own results (what it carries from one cycle to the next, RunningUsage, in use) beside the plain
    # mode's, for RUN consecutive cycles in every EVERY: what an acceleration kept across cycles must not change.
    carried: list[tuple[CycleResult, CycleResult]] = []

    def cycle(snapshot: Snapshot, policy: Policy) -> CycleResult:
        nonlocal seen
        if snapshot.pending and seen % EVERY == 0:
            snapshots.append((snapshot, policy))
        result = run_cycle(snapshot, policy=policy, usage=usage)
        if snapshot.pending and seen % EVERY < RUN:
            carried.append((result, run_cycle(snapshot, policy=policy, accelerate=False)))
        seen += 1
        return result

    run_replay(scn.trace, scn.cluster, scn.quotas, get_policy("production"), cycle=cycle)
    assert len(snapshots) >= 20, len(snapshots)  # enough of the day's cycles to mean something
    assert len(carried) >= 2 * len(snapshots), len(carried)
    for n, (result, plain) in enumerate(carried):
        assert result == plain, n
    decided = 0
    for n, (snapshot, policy) in enumerate(snapshots):
        explained = replace(policy, waits=True, explain=True)  # as the production loop runs it
        fast = run_cycle(snapshot, policy=explained)
        assert run_cycle(snapshot, policy=explained, accelerate=False) == fast, snapshot.now
        if n % 5 == 0:  # estimated starts too (a forecast is many cycles)
            assert forecast(snapshot, policy, 10, accelerate=False) == forecast(snapshot, policy, 10), snapshot.now
        decided += bool(fast.admits or fast.preemptions)
    assert decided >= 10, decided  # cycles that admitted or preempted
