"""Why quotas keep a job out, in the numbers the quota API shows: a project's `used` (every device its jobs
hold, preemptible ones too), its `guaranteed`, `borrowed` (used above the guarantee) and `borrow_limit`, and
what its organization has to lend. Written from the state at the end of the cycle, the state the quota table
shows once the cycle's decisions are applied, so no reason contradicts the table beside it."""

from __future__ import annotations

from .quota import QuotaFailure, QuotaState

FREED = "quota was freed by preemption in this cycle; considered again next cycle"


class QuotaReasons:
    """Reasons of quota waits from one quota state. What a reason says of the project, the flavor and the limit
    (what the project uses and is guaranteed, what its organization has to lend) is written once per (project,
    flavor, kind of limit); each job's need is then put in: thousands of jobs wait on a few hundred limits."""

    def __init__(self, quota: QuotaState) -> None:
        self.quota = quota
        self.frames: dict[tuple[str, str, str], tuple[str, str, int, int]] = {}  # -> (head, tail, used, guaranteed)

    def reason(self, project: str, demand: dict[str, int], failure: QuotaFailure) -> str:
        kind, f = failure.kind, failure.flavor
        if kind == "max_running":
            return f"project {project} is at its limit of {self.quota.max_running.get(project)} running jobs"
        need = demand[f]
        if kind == "no_quota":
            return f"project {project} has no quota for {f} (needs {need})"
        if kind == "lent":
            return self._lent(project, f, need)
        frame = self.frames.get((project, f, kind))
        if frame is None:
            frame = self.frames[(project, f, kind)] = self._frame(project, f, kind)
        head, tail, used, g = frame
        return f"{head}; this job needs {need}, so it would borrow {max(0, used + need - g)}{tail}"

    def _frame(self, project: str, f: str, kind: str) -> tuple[str, str, int, int]:
        quota = self.quota
        key = (project, f)
        used = quota.used[key] + quota.pre[key]
        g = quota.guar.get(key, 0)
        borrowed = quota.borrowed(project, f)
        head = f"project {project} uses {used} of its {g} guaranteed {f}" if g else \
            f"project {project} has no guaranteed {f}" + (f" and uses {used}" if used and not borrowed else "")
        if borrowed:
            head += f" and borrows {borrowed}"
        if kind == "borrowing_off":
            return head, ", and borrowing is off", used, g
        limit = quota.blimit.get(key, 0)
        if kind == "borrow_limit":
            return head, f", over its borrow limit of {limit}", used, g
        lenders, limited, held, unowned = quota.lending(project, f)
        notes = [f"their lend limits keep back {limited} more"] if limited else []
        if held:
            notes.append(f"the lend hold keeps back {held} more, their recent use and waiting jobs")
        kept = f" ({'; '.join(notes)})" if notes else ""
        cohort = quota.cohort_of(project)
        borrowers = [(p, quota.borrowed(p, f)) for p in quota.members.get(cohort, ()) if p != project]
        taken = " and ".join(f"{p} ({b})" for p, b in sorted(borrowers) if b)
        by = f"; it is borrowed by {taken}" if taken and not lenders + unowned else ""
        return head, (f" (borrow limit {limit}, {max(0, limit - borrowed)} of it unused), but organization "
                      f"{cohort} has only {lenders + unowned} {f} to lend: {lenders} of its projects' idle "
                      f"guarantee{kept} and {unowned} that nobody is guaranteed{by}"), used, g


    def _lent(self, project: str, f: str, need: int) -> str:
        """A job inside its guarantee whose organization lent it out: what the organization's borrowers would take
        beyond what its lenders may lend once the job runs, against the capacity nobody is guaranteed that others
        leave."""
        quota = self.quota
        key = (project, f)
        used, g = quota.used[key] + quota.pre[key], quota.guar.get(key, 0)
        cohort = quota.cohort_of(project)
        own = quota.beyond_lenders(cohort, f)
        beyond = quota.beyond_lenders_with(project, f, need, waiting=True)
        left = max(0, quota.unowned.get(f, 0) - (quota.excess[f] - max(0, own)))
        return (f"project {project} uses {used} of its {g} guaranteed {f}; this job needs {need}, within the "
                f"guarantee, but organization {cohort}'s projects borrow it: with this job its borrowers would take "
                f"{beyond:g} {f} more than its lenders may lend, and only {left:g} that nobody is guaranteed are "
                f"free of other organizations' use; its borrowers' jobs are preempted to give it back as soon as "
                f"they may be")


def short_quota_reason(failure: QuotaFailure) -> str:
    """The reason of a quota wait when the policy does not explain waits (Policy.explain=False)."""
    if failure.kind == "max_running":
        return "project is at its limit of running jobs"
    return f"quota: {failure.kind} {failure.flavor}"
