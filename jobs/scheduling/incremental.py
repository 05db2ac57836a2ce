"""Placeholder, replaced below."""

from __future__ import annotations

from .cycle import run_cycle
from .model import DEFAULT_POLICY, CycleResult, Policy, Snapshot


class IncrementalScheduler:
    def __init__(self, policy: Policy = DEFAULT_POLICY) -> None:
        self.policy = policy

    def cycle(self, snapshot: Snapshot) -> CycleResult:
        return run_cycle(snapshot, self.policy)
