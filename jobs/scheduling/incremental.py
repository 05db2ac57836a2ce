"""An incremental wrapper around the cycle: after one new submission, evaluate only what changed.

`IncrementalScheduler.cycle(snapshot)` returns exactly `run_cycle(snapshot, policy)` (tested with hypothesis).
It keeps the previous cycle (its ordered outcomes and final state). When the new snapshot differs from the
previous one only by one more pending job:
  1. the job's place in cycle order is found by bisection (sort keys do not depend on other pending jobs);
  2. the state as it was at that place is recovered by unwinding the effects of the outcomes after it;
  3. the job is evaluated there. If it just waits (no admission, preemption, reservation, strict block or
     backfill head), nothing after it changes: the effects are replayed and only the waits whose positions or
     ETA move are rebuilt. Otherwise the jobs after it are evaluated again from that state, as run_cycle would.
Anything else (time moved, a job finished, quotas changed) runs a full cycle.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from operator import attrgetter, itemgetter

from .cycle import Cycle, Outcome, gc_paused, run_cycle
from .explain import Explainer, WaitEntry
from .model import DEFAULT_POLICY, CycleResult, PendingJob, Policy, Snapshot, Wait
from .ordering import sort_key
from .preemption import MAX_SIMULATIONS

_first = itemgetter(0)  # the sort key of a (sort key, entry) group item
_wait_of = attrgetter("wait")


def _effectful(out: Outcome) -> bool:
    """Whether an outcome changed the state (a plain wait changed nothing but the failure caches)."""
    return bool(out.side_effects or out.simulations)


class IncrementalScheduler:
    def __init__(self, policy: Policy = DEFAULT_POLICY) -> None:
        self.policy = policy
        self._snapshot: Snapshot | None = None
        self._cycle: Cycle | None = None
        self._keys: list[tuple] = []
        self._explainer: Explainer | None = None
        self._entries: list[WaitEntry] = []
        # Waits indexed by what a new job can change (non-strict policies): entries in cycle order, as (sort key,
        # entry), per project, per flavor asked for and per primary flavor.
        self._entry_keys: list[tuple] = []
        self._groups: dict[tuple[str, str], list[tuple[tuple, WaitEntry]]] = {}
        # The outcomes that changed the state, in cycle order, with their sort keys: a new job unwinds and replays
        # only those after it, found by bisection instead of scanning every later outcome.
        self._effectful: list[Outcome] = []
        self._effectful_keys: list[tuple] = []
        self._ids: set[int] = set()  # ids of the previous snapshot's pending jobs (a new id must be new)
        self._result: CycleResult | None = None
        self.last_was_incremental = False

    def cycle(self, snapshot: Snapshot) -> CycleResult:
        if self._snapshot is None or len(snapshot.pending) != len(self._snapshot.pending) + 1:
            with gc_paused():  # a full cycle
                return self._cycle_once(snapshot)
        return self._cycle_once(snapshot)

    def _cycle_once(self, snapshot: Snapshot) -> CycleResult:
        new_job = self._one_more(snapshot)
        result = self._add(snapshot, new_job) if new_job is not None else None
        self.last_was_incremental = result is not None
        if result is None:
            result = self._full(snapshot)
        return result

    # -- full cycle -------------------------------------------------------------------------------------------

    def _full(self, snapshot: Snapshot) -> CycleResult:
        cycle = Cycle(snapshot, self.policy)
        cycle.run()
        self._finish(snapshot, cycle)
        return self._result

    def _finish(self, snapshot: Snapshot, cycle: Cycle) -> None:
        key = sort_key(self.policy, cycle.shares)
        self._keys = [key(o.job) for o in cycle.outcomes]
        self._entries = [o.entry for o in cycle.outcomes if o.entry is not None]
        self._entry_keys = [k for k, o in zip(self._keys, cycle.outcomes, strict=True) if o.entry is not None]
        self._effectful = [o for o in cycle.outcomes if _effectful(o)]
        self._effectful_keys = [k for k, o in zip(self._keys, cycle.outcomes, strict=True) if _effectful(o)]
        self._ids = {j.id for j in snapshot.pending}
        self._groups = {}
        if self.policy.blocking != "strict":
            for k, entry in zip(self._entry_keys, self._entries, strict=True):
                for g in self._group_keys(entry):
                    self._groups.setdefault(g, []).append((k, entry))
        if self.policy.explain:
            self._explainer = Explainer(cycle.state)
            waits = self._explainer.explain(self._entries)
        else:
            self._explainer = Explainer(cycle.state, etas=False)
            waits = self._explainer.brief(self._entries)
        self._result = cycle.assemble(waits)
        self._cycle = cycle
        self._snapshot = snapshot

    # -- one new submission -----------------------------------------------------------------------------------

    def _one_more(self, snapshot: Snapshot) -> PendingJob | None:
        prev = self._snapshot
        if prev is None or len(snapshot.pending) != len(prev.pending) + 1 or snapshot.now != prev.now:
            return None
        for name in ("nodes", "quotas", "projects", "running"):
            a, b = getattr(prev, name), getattr(snapshot, name)
            if a is not b and a != b:
                return None
        n = len(prev.pending)
        if snapshot.pending[:n] == prev.pending:
            new = snapshot.pending[n]
        else:
            known = {j.id: j for j in prev.pending}
            extra = [j for j in snapshot.pending if known.get(j.id) != j]
            if len(extra) != 1:
                return None
            new = extra[0]
        if new.id in self._ids:
            return None
        return new

    def _add(self, snapshot: Snapshot, job: PendingJob) -> CycleResult | None:
        cycle = self._cycle
        assert cycle is not None and self._result is not None
        key = sort_key(self.policy, cycle.shares)(job)
        p = bisect_left(self._keys, key)
        # A simulated removal by the new job uses one of the cycle's budget: later jobs may then find it spent.
        budget_tight = cycle.state.simulations >= MAX_SIMULATIONS
        # Only outcomes that changed the state need undoing (a plain wait changed nothing but the failure caches,
        # which are cleared once).
        q = bisect_left(self._effectful_keys, key)
        effectful = self._effectful[q:]
        for out in reversed(effectful):
            cycle.unwind(out)
        cycle.state.forget_failures()
        out = cycle.evaluate(job)
        cycle.outcomes.insert(p, out)
        self._keys.insert(p, key)
        cycle.state.snapshot = snapshot
        if out.side_effects or (out.simulations and budget_tight):
            # Everything after it may change: evaluate those jobs again from here, as run_cycle would.
            redo = [o.job for o in cycle.outcomes[p + 1:]]
            del cycle.outcomes[p + 1:]
            for other in redo:
                cycle.outcomes.append(cycle.evaluate(other))
            self._finish(snapshot, cycle)
            return self._result
        for other in effectful:
            cycle.replay(other)
        if out.simulations:  # it used simulations without changing anything else: later jobs replay its count
            self._effectful.insert(q, out)
            self._effectful_keys.insert(q, key)
        self._ids.add(job.id)
        if not self.policy.explain:
            self._splice_brief(out, key)
        elif self.policy.blocking == "strict":
            self._splice(out, p)
        else:
            self._splice_indexed(out, key)
        self._snapshot = snapshot
        return self._result

    @staticmethod
    def _group_keys(entry: WaitEntry) -> list[tuple[str, str]]:
        return [("p", entry.job.project), ("primary", entry.info.primary)] + [("f", f) for f in entry.info.flavors]

    def _splice_indexed(self, out: Outcome, key: tuple) -> None:
        """_splice for policies without strict blocking, touching only the waits of the new job's project and
        flavors (the only ones whose position or ETA it can move) instead of every later wait."""
        entry = out.entry
        assert entry is not None and self._explainer is not None and self._result is not None
        job, info = entry.job, entry.info
        project, primary, demand, flavors = job.project, info.primary, info.demand, info.flavors
        groups = self._groups
        e = bisect_left(self._entry_keys, key)
        # The new entry's counts are those explain would have reached just before it: the previous entry of each
        # group plus that entry's own contribution (O(1) instead of summing every entry ahead).
        same_project = groups.get(("p", project), [])
        at = bisect_left(same_project, key, key=_first)
        entry.proj_pos = at + 1
        before = same_project[at - 1][1] if at else None
        entry.mr_ahead = before.mr_ahead + (before.code == "max_running") if before is not None else 0
        same_primary = groups.get(("primary", primary), [])
        entry.flav_pos = bisect_left(same_primary, key, key=_first) + 1
        ahead: dict[str, int] = dict.fromkeys(flavors, 0)
        later: dict[str, list[tuple[tuple, WaitEntry]]] = {}
        for f in flavors:
            members = groups.get(("f", f), [])
            k = bisect_left(members, key, key=_first)
            later[f] = members[k:]
            if k:
                before = members[k - 1][1]
                ahead[f] = before.ahead[f] + (before.info.demand[f] if before.code != "unschedulable" else 0)
        entry.ahead = ahead
        explainer = self._explainer
        explainer.finish(entry, {})
        # The waits after it that it can move: same project, same primary flavor, or sharing a flavor. A waiting
        # job with a primary flavor asks for it, so the flavor groups cover the primary one (except jobs asking
        # for nothing, whose primary is "").
        if len(flavors) == 1 and primary == flavors[0] and primary:
            touched = [other for _, other in later[primary]]
            touched.extend(other for _, other in same_project[at:] if primary not in other.info.demand)
        else:
            seen: dict[int, WaitEntry] = {}
            for members in (*later.values(), same_project[at:],
                            same_primary[bisect_left(same_primary, key, key=_first):]):
                for _, other in members:
                    seen[id(other)] = other
            touched = list(seen.values())
        counts = entry.code != "unschedulable"
        max_running = entry.code == "max_running"
        eta = explainer.eta
        for other in touched:
            # Its code and reason are unchanged (the end state is the same); its ETA depends only on what is ahead
            # of it (flavor demand, max_running rank), so it is computed again only when those move.
            moved = False
            if other.job.project == project:
                other.proj_pos += 1
                if max_running:
                    other.mr_ahead += 1
                    moved = True
            if other.info.primary == primary:
                other.flav_pos += 1
            if counts:
                other_ahead = other.ahead
                for f, d in demand.items():
                    if f in other_ahead:
                        other_ahead[f] += d
                        moved = True
            if moved:
                other.eta = eta(other, {})
            other.wait = Wait(other.job.id, other.reason, other.code, other.proj_pos, other.flav_pos, other.eta)
        for g in self._group_keys(entry):
            insort(groups.setdefault(g, []), (key, entry), key=_first)
        self._entries.insert(e, entry)
        self._entry_keys.insert(e, key)
        prev = self._result
        stats = dict(prev.stats)
        stats["pending"] += 1
        stats["considered"] += out.considered
        stats["waiting"] += 1
        waits = tuple(map(_wait_of, self._entries))
        self._result = CycleResult(prev.admits, prev.preemptions, waits, stats, prev.reservations)

    def _splice_brief(self, out: Outcome, key: tuple) -> None:
        """Insert the new job's wait when waits are not explained (no positions or ETA move)."""
        entry = out.entry
        assert entry is not None and self._explainer is not None and self._result is not None
        self._explainer.brief([entry])
        e = bisect_left(self._entry_keys, key)
        self._entries.insert(e, entry)
        self._entry_keys.insert(e, key)
        if self.policy.blocking != "strict":
            for g in self._group_keys(entry):
                insort(self._groups.setdefault(g, []), (key, entry), key=_first)
        prev = self._result
        stats = dict(prev.stats)
        stats["pending"] += 1
        stats["considered"] += out.considered
        stats["waiting"] += 1
        waits = tuple(map(_wait_of, self._entries))
        self._result = CycleResult(prev.admits, prev.preemptions, waits, stats, prev.reservations)

    def _splice(self, out: Outcome, p: int) -> None:
        """Insert the new job's wait and rebuild the waits whose position or ETA it moves."""
        entry = out.entry
        assert entry is not None and self._explainer is not None and self._result is not None
        entries = self._entries
        e = sum(1 for o in self._cycle.outcomes[:p] if o.entry is not None)
        job, info = entry.job, entry.info
        proj_pos = flav_pos = 1
        ahead: dict[str, int] = dict.fromkeys(info.flavors, 0)
        mr_ahead = 0
        etas: dict[int, float | None] = {}
        for other in entries[:e]:
            etas[other.job.id] = other.eta
            if other.job.project == job.project:
                proj_pos += 1
                mr_ahead += other.code == "max_running"
            if other.info.primary == info.primary:
                flav_pos += 1
            if other.code != "unschedulable":
                for f, d in other.info.demand.items():
                    if f in ahead:
                        ahead[f] += d
        entry.proj_pos, entry.flav_pos, entry.ahead, entry.mr_ahead = proj_pos, flav_pos, ahead, mr_ahead
        explainer = self._explainer
        explainer.finish(entry, etas)
        counts = entry.code != "unschedulable"
        changed = {job.id}
        waits: list[Wait] = [w.wait for w in entries[:e]] + [entry.wait]
        for other in entries[e:]:
            touched = False
            if other.job.project == job.project:
                other.proj_pos += 1
                if entry.code == "max_running":
                    other.mr_ahead += 1
                touched = True
            if other.info.primary == info.primary:
                other.flav_pos += 1
                touched = True
            if counts:
                for f, d in info.demand.items():
                    if f in other.ahead:
                        other.ahead[f] += d
                        touched = True
            if touched or (other.code == "blocked" and other.blocker in changed):
                old = other.eta
                explainer.finish(other, etas)
                if other.eta != old:
                    changed.add(other.job.id)
            else:
                etas[other.job.id] = other.eta
            waits.append(other.wait)
        entries.insert(e, entry)
        self._entry_keys.insert(e, sort_key(self.policy, self._cycle.shares)(job))
        prev = self._result
        stats = dict(prev.stats)
        stats["pending"] += 1
        stats["considered"] += out.considered
        stats["waiting"] += 1
        self._result = CycleResult(prev.admits, prev.preemptions, tuple(waits), stats, prev.reservations)


__all__ = ["IncrementalScheduler", "run_cycle"]
