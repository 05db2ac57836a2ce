"""The lend hold: a project's recent demand is not lent to other projects (Policy.lend_hold seconds).

On the Philly week every reclaim was churn: a borrower took a GPU seconds or minutes before the project that is
guaranteed it asked again (its last job had just ended, or it was submitting jobs one after another), and was
preempted for it. Holding back what a project held at any moment of the last few seconds, plus what it submitted
in them, removes most of that churn at no cost to any guarantee (only borrowers wait, for seconds).

    held(p, f) = max over t in [now - hold, now] of the devices of f p's jobs held at t
                 + devices of f p's jobs submitted in (now - hold, now] that could take g(p, f) back

QuotaState lends only a project's guarantee above max(used now, held). The hold changes only when an entry leaves
the window, so the cycle asks to be woken then (`expiry`) if a job waits for what is held.

A submitted job that could never take its project's guarantee back holds none of it: a preemptible one (it never
preempts, and any borrower may preempt it) or one asking for more of the flavor than the guarantee (it borrows
itself). Held for them, the guarantee only kept a borrower waiting for the hold's few seconds while the preemptible
job started in it, and the borrower then preempted that job (`make run`'s demo: its preemptible job was evicted
5 s after it started).

A project's waiting jobs are its demand now: what its non-preemptible jobs that each fit its guarantee ask for is
held too (`waiting_holds`). Lent while they wait, it would be taken back from the borrower as soon as one of them is
evaluated (in this cycle, or the next: a quiet cluster would churn). A job larger than its project's guarantee holds
nothing: it could never take a guarantee back. A job is held for whether or not it fits the part of the guarantee
idle now: counting only those made the hold fall as soon as the cycle admitted some of them (the rest no longer fit
what was left idle), and the next cycle lent what the one before had held.

    held(p, f) = max(the recent demand above, use now + waiting jobs of p of at most g(p, f) devices of f)

Both keep a guarantee from borrowers. Only the second, demand now, counts against a sibling's job within its own
guarantee (quota.py's r_w): recent use is a guess that the project comes back, and a sibling that preempted a
borrower for it, while those devices sat idle, traded a reclaim that might come for one that surely did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .model import Arrival, Snapshot

if TYPE_CHECKING:
    from .quota import QuotaState

Key = tuple[str, str]  # (project, flavor)


def lend_holds(snapshot: Snapshot, hold: float, used: dict[Key, int], pre: dict[Key, int],
               starts: list[tuple[Key, float, int]], guar: dict[Key, int]) -> dict[Key, int]:
    """held(p, f) for each (project, flavor) with an ended attempt or an arrival in the window (any other's
    recent peak is its current use, which QuotaState counts anyway). `used` and `pre`: devices its jobs hold now
    (non-preemptible, preemptible); `starts`: (key, started_at, devices) of running replicas that started within
    the window, the only running ones whose holding changed in it; `guar`: the guarantees, g(p, f)."""
    since = snapshot.now - hold
    # Usage changes per key over the window from the level at its start: +devices at a start (an attempt that
    # ended but started earlier counts from the window's start), -devices at an end.
    changes: dict[Key, list[tuple[float, int]]] = {}
    for e in snapshot.ended:
        if e.ended_at > since and e.devices > 0:
            steps = changes.setdefault((e.project, e.flavor), [])
            steps.append((max(e.started_at, since), e.devices))
            steps.append((e.ended_at, -e.devices))
    arrived: dict[Key, int] = {}
    for a in snapshot.arrivals:
        if a.at > since and takes_back(a, guar):
            key = (a.project, a.flavor)
            arrived[key] = arrived.get(key, 0) + a.devices
            changes.setdefault(key, [])
    base = {key: used.get(key, 0) + pre.get(key, 0) for key in changes}  # usage now, less the recent starts
    for key, at, devices in starts:
        if key in changes:
            changes[key].append((at, devices))
            base[key] -= devices
    held: dict[Key, int] = {}
    for key, steps in changes.items():
        level = peak = base[key]
        for _, delta in sorted(steps):  # at one moment ends (negative) come first: a freed device reused
            level += delta
            peak = max(peak, level)
        held[key] = peak + arrived.get(key, 0)
    return held


def takes_back(arrival: Arrival, guar: dict[Key, int]) -> bool:
    """Could the submitted job take its project's guarantee of the flavor back (rule (a) of preemption.py)? Judged
    per flavor, as an Arrival is: a job of several flavors that is larger than its guarantee of another one still
    holds this one (it could not take it back either), as every submission did before."""
    return not arrival.preemptible and arrival.devices <= guar.get((arrival.project, arrival.flavor), 0)


def expiry(snapshot: Snapshot, hold: float, binding: set[Key], guar: dict[Key, int]) -> float | None:
    """The next moment an entry of a `binding` key (one whose hold keeps back more than it uses) leaves the window:
    only then can what is held fall; None when there is none."""
    now = snapshot.now
    ends = [e.ended_at + hold for e in snapshot.ended if (e.project, e.flavor) in binding and e.ended_at + hold > now]
    ends += [a.at + hold for a in snapshot.arrivals
             if (a.project, a.flavor) in binding and a.at + hold > now and takes_back(a, guar)]
    return min(ends, default=None)


def waiting_holds(snapshot: Snapshot, quota: QuotaState, used: dict[Key, int], pre: dict[Key, int]) -> dict[Key, int]:
    """held(p, f) = use now + the devices of f that p's waiting jobs ask for, for each (project, flavor) with a waiting
    job that is not preemptible, whose project's budget is not spent, and whose demand of every flavor fits its
    project's guarantee."""
    waiting: dict[Key, int] = {}
    guar = quota.guar
    for job in snapshot.pending:
        if job.preemptible:
            continue
        if len(job.groups) == 1:  # most jobs: written out, without a demand dict
            group = job.groups[0]
            devices = group.replicas * group.devices
            key = (job.project, group.flavor)
            if devices and devices <= guar.get(key, 0):
                waiting[key] = waiting.get(key, 0) + devices
            continue
        demand: dict[str, int] = {}
        for group in job.groups:
            demand[group.flavor] = demand.get(group.flavor, 0) + group.replicas * group.devices
        if not all(d <= guar.get((job.project, f), 0) for f, d in demand.items()):
            continue
        for f, d in demand.items():
            if d:
                waiting[(job.project, f)] = waiting.get((job.project, f), 0) + d
    stopped = {p.name for p in snapshot.projects if p.budget_stop}
    return {key: used.get(key, 0) + pre.get(key, 0) + d for key, d in waiting.items() if key[0] not in stopped}
