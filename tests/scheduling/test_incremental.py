"""The incremental scheduler returns exactly what run_cycle returns on the same snapshot."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings

from jobs.scheduling import IncrementalScheduler, run_cycle

from .test_properties import scenarios


def same(a, b) -> bool:
    """Equal results; on a difference, print the first differing field or wait to ease debugging."""
    if a == b:
        return True
    for name in ("admits", "preemptions", "stats", "reservations"):
        if getattr(a, name) != getattr(b, name):
            print(name, getattr(a, name), getattr(b, name), sep="\n  ")
    for x, y in zip(a.waits, b.waits, strict=False):
        if x != y:
            print("incremental", x, "\nfull       ", y)
            break
    return False


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_one_new_submission_equals_a_full_cycle(case):
    snap, policy, seed = case
    if not snap.pending:
        return
    rnd = random.Random(seed)
    pending = list(snap.pending)
    rnd.shuffle(pending)
    sched = IncrementalScheduler(policy)
    before = replace(snap, pending=tuple(pending[:-1]))
    assert same(sched.cycle(before), run_cycle(before, policy))
    # Add the held-back jobs one at a time, each time comparing with a fresh full cycle.
    for k in range(len(pending), len(pending) + 1):
        after = replace(snap, pending=tuple(pending[:k]))
        assert same(sched.cycle(after), run_cycle(after, policy))
        assert sched.last_was_incremental


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_a_chain_of_submissions_stays_equal(case):
    snap, policy, seed = case
    rnd = random.Random(seed)
    pending = list(snap.pending)
    rnd.shuffle(pending)
    sched = IncrementalScheduler(policy)
    for k in range(len(pending) + 1):
        current = replace(snap, pending=tuple(pending[:k]))
        assert same(sched.cycle(current), run_cycle(current, policy))
        assert k == 0 or sched.last_was_incremental


def test_other_changes_run_a_full_cycle():
    from .builders import job, nodes, snapshot

    snap = snapshot(nodes(2), [job(1), job(2)])
    sched = IncrementalScheduler()
    sched.cycle(snap)
    later = replace(snap, now=snap.now + 1)
    assert sched.cycle(later) == run_cycle(later)
    assert not sched.last_was_incremental
