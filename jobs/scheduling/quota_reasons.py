"""Why quotas keep a job out, in the numbers the quota API shows: a project's `used` (every device its jobs
hold, preemptible ones too), its `guaranteed`, `borrowed` (used above the guarantee) and `borrow_limit`, and
what its organization has to lend. Written from the state at the end of the cycle, the state the quota table
shows once the cycle's decisions are applied, so no reason contradicts the table beside it."""

from __future__ import annotations

from .quota import QuotaFailure, QuotaState

FREED = "quota was freed by preemption in this cycle; considered again next cycle"


def quota_reason(quota: QuotaState, project: str, demand: dict[str, int], failure: QuotaFailure) -> str:
    if failure.kind == "max_running":
        return f"project {project} is at its limit of {quota.max_running.get(project)} running jobs"
    f = failure.flavor
    key = (project, f)
    need = demand[f]
    if failure.kind == "no_quota":
        return f"project {project} has no quota for {f} (needs {need})"
    used = quota.used[key] + quota.pre[key]
    g = quota.guar.get(key, 0)
    borrowed = quota.borrowed(project, f)
    after = max(0, used + need - g)
    head = f"project {project} uses {used} of its {g} guaranteed {f}"
    if borrowed:
        head += f" and borrows {borrowed}"
    would = f"this job needs {need}, so it would borrow {after}"
    if failure.kind == "borrowing_off":
        return f"{head}; {would}, and borrowing is off"
    limit = quota.blimit.get(key, 0)
    if failure.kind == "borrow_limit":
        return f"{head}; {would}, over its borrow limit of {limit}"
    lenders, limited, held, unowned = quota.lending(project, f)
    notes = [f"their lend limits keep back {limited} more"] if limited else []
    if held:
        notes.append(f"the lend hold keeps back {held} more, their use of the last {quota.hold:g} s")
    kept = f" ({'; '.join(notes)})" if notes else ""
    return (f"{head}; {would} (borrow limit {limit}), but organization {quota.cohort_of(project)} has only "
            f"{lenders + unowned} {f} to lend: {lenders} of its projects' idle guarantee{kept} and {unowned} "
            f"that nobody is guaranteed")


def short_quota_reason(failure: QuotaFailure) -> str:
    """The reason of a quota wait when the policy does not explain waits (Policy.explain=False)."""
    if failure.kind == "max_running":
        return "project is at its limit of running jobs"
    return f"quota: {failure.kind} {failure.flavor}"
