"""Phase 1, order: one sort key per policy, each ending with the job id so every cycle is deterministic.

Fair share (used by "priority-fairshare") is the dominant share of a project, computed once at the start of the
cycle from the jobs running then:

    share(p) = max over flavors f with guaranteed(p, f) > 0 of  used(p, f) / guaranteed(p, f)
               + decayed_usage(p) / (usage_window * G(p))          where G(p) = sum of p's guarantees

i.e. (current use + past use) / guarantee, with past device-seconds spread over the project's flavors in
proportion to its guarantees and converted to devices by `Policy.usage_window`. A project that just had a burst
carries it in `decayed_usage` and queues behind one that used less. Projects without any guarantee come after
all projects with one at the same priority, ordered by their absolute use (devices now + past weight).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from .model import PendingJob, Policy, Project, Quota, RunningJob

ShareKey = tuple[int, float]


def decayed_usage(previous: float, devices: float, seconds: float, half_life: float) -> float:
    """A project's decayed device-seconds `seconds` later, having held `devices` all along: the old value decays by
    2^(-t/half-life) and the use in between is integrated with the same decay. The one formula of the live
    scheduler and of replay; steady use of D devices converges to D x the mean life (half-life / ln 2)."""
    if seconds <= 0:
        return previous
    rate = math.log(2) / half_life
    kept = math.exp(-rate * seconds)
    return previous * kept + devices * (1.0 - kept) / rate


def fair_shares(projects: Iterable[Project], quotas: Iterable[Quota], running: Iterable[RunningJob],
                policy: Policy, used: dict[str, dict[str, int]] | None = None) -> dict[str, ShareKey]:
    """`used`: devices of `running` per project and job flavor when the caller already summed them."""
    guaranteed: dict[str, dict[str, int]] = {}
    for q in quotas:
        if q.guaranteed > 0:
            per = guaranteed.setdefault(q.project, {})
            per[q.flavor] = per.get(q.flavor, 0) + q.guaranteed
    if used is None:
        used = {}
        for job in running:
            per = used.setdefault(job.project, {})
            per[job.flavor] = per.get(job.flavor, 0) + sum(a.devices for a in job.placement)
    window = policy.usage_window
    decayed = {p.name: p.decayed_usage for p in projects}
    shares: dict[str, ShareKey] = {}
    for name in set(decayed) | set(used) | set(guaranteed):
        g = guaranteed.get(name, {})
        u = used.get(name, {})
        past = decayed.get(name, 0.0) / window
        total_g = sum(g.values())
        if total_g:
            current = max(u.get(f, 0) / gf for f, gf in g.items())
            shares[name] = (0, current + past / total_g)
        else:
            shares[name] = (1, sum(u.values()) + past)
    return shares


def key_priority_fairshare(shares: dict[str, ShareKey]) -> Callable[[PendingJob], tuple]:
    """Priority desc, then fair share asc, then submitted_at, then id."""
    unknown: ShareKey = (1, 0.0)
    return lambda j: (-j.priority, shares.get(j.project, unknown), j.submitted_at, j.id)


def key_fifo(_shares: dict[str, ShareKey]) -> Callable[[PendingJob], tuple]:
    """Submitted_at, then id."""
    return lambda j: (j.submitted_at, j.id)


def key_sjf(_shares: dict[str, ShareKey]) -> Callable[[PendingJob], tuple]:
    """Oracle duration asc (unknown last), then submitted_at, then id. Only trace replay fills duration_hint."""
    return lambda j: (j.duration_hint is None, j.duration_hint or 0.0, j.submitted_at, j.id)


ORDERINGS: dict[str, Callable[[dict[str, ShareKey]], Callable[[PendingJob], tuple]]] = {
    "priority-fairshare": key_priority_fairshare,
    "fifo": key_fifo,
    "sjf": key_sjf,
}


def sort_key(policy: Policy, shares: dict[str, ShareKey]) -> Callable[[PendingJob], tuple]:
    try:
        return ORDERINGS[policy.ordering](shares)
    except KeyError:
        raise ValueError(f"unknown ordering {policy.ordering!r}; known: {', '.join(sorted(ORDERINGS))}") from None


def order_jobs(pending: Iterable[PendingJob], policy: Policy, shares: dict[str, ShareKey]) -> list[PendingJob]:
    return sorted(pending, key=sort_key(policy, shares))
