"""How many replicas a service should run: the Kubernetes HorizontalPodAutoscaler's rules, as a pure function.

- The recommendation is ceil(metric total / target per replica), clamped to [min, max].
- Up at once, but within any 60 s to at most twice the replicas the period started with (at least one more, so a
  service at 0 can start): HPA's default scale-up policy of 100 % per period.
- Down only to the highest recommendation of the last 300 s (HPA's scale-down stabilisation window; a
  recommendation exactly 300 s old has left it, as in HPA where the cutoff is exclusive).
- No metric: the replicas stay (clamped to [min, max] only), with the reason.
The minimum is a floor that applies at once: raising it is an order, not a metric to be smoothed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

WINDOW = 300.0  # scale-down stabilisation window, seconds
PERIOD = 60.0  # scale-up period: at most doubling within it


@dataclass(frozen=True)
class Policy:
    min_replicas: int
    max_replicas: int
    target_per_replica: float  # the metric one replica should carry


@dataclass(frozen=True)
class ScaleUp:
    at: float
    before: int
    after: int


@dataclass(frozen=True)
class Decision:
    replicas: int
    recommendation: int | None  # None: no metric (nothing for the window to remember)
    reason: str


def recommend(total: float, policy: Policy) -> int:
    """ceil(total / target per replica), within [min, max]."""
    wanted = math.ceil(max(total, 0.0) / policy.target_per_replica)
    return min(policy.max_replicas, max(policy.min_replicas, wanted))


def decide(policy: Policy, current: int, total: float | None, now: float, *,
           recommendations: Sequence[tuple[float, int]] = (), scale_ups: Sequence[ScaleUp] = (),
           missing: str = "no metric") -> Decision:
    """The replicas for now. `recommendations` are earlier (at, recommendation) pairs, `scale_ups` the earlier
    increases; both may hold older entries, which are ignored. `missing` says why `total` is None."""
    if total is None:
        replicas = min(policy.max_replicas, max(policy.min_replicas, current))
        return Decision(replicas, None, _clamped(replicas, current, policy) or f"{missing}: kept {current}")
    rec = recommend(total, policy)
    per = f"{total:g} / {policy.target_per_replica:g} per replica"
    if rec > current:
        start = current - sum(u.after - u.before for u in scale_ups
                            if now - PERIOD < u.at <= now and u.after > u.before)
        limit = max(2 * start, start + 1)
        replicas = max(min(rec, limit), policy.min_replicas, current)
        if replicas < rec:
            return Decision(replicas, rec, f"{per} wants {rec}; up to {replicas}, at most doubling per minute")
        return Decision(replicas, rec, f"{per} wants {rec}: up at once")
    if rec < current:
        highest = max([rec, *(r for at, r in recommendations if now - WINDOW < at <= now)])
        # A lowered maximum is an order too: it applies at once, whatever the window remembers.
        replicas = min(current, policy.max_replicas, max(highest, policy.min_replicas))
        if replicas == current:
            return Decision(current, rec, f"{per} wants {rec}; kept {current}: {highest} within the last "
                                          f"{WINDOW:.0f} s")
        return Decision(replicas, rec, f"{per} wants {rec}; down to {replicas}, the highest of the last "
                                       f"{WINDOW:.0f} s")
    return Decision(current, rec, f"{per}: {rec} is right")


def _clamped(replicas: int, current: int, policy: Policy) -> str:
    if replicas > current:
        return f"below the minimum {policy.min_replicas}: up to it"
    if replicas < current:
        return f"above the maximum {policy.max_replicas}: down to it"
    return ""
