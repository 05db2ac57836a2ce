"""Jobs a cycle's budgets left unsearched, and the later jobs they hold back (docs/scheduling.md, phase 4).

A cycle bounds its work: at most MAX_SIMULATIONS preemptions found (preemption.py) and MAX_RETRIES evaluations
again after commits (cycle.py). A job left waiting without the search, or without the evaluation again, that a
spent budget could not afford may take, in the next cycle, what a later job of this cycle was admitted into: a
fresh cycle would have searched it first. So it holds back, for the rest of the cycle, the later jobs its search
could take on its flavors: its project's jobs of lower priority (rule (b)) and, when it passes its quota or only
lent guarantee keeps it out, preemptible jobs of other projects (rules (a), (c)). They wait (code `held`) for the
next cycle, which searches it first.
"""

from __future__ import annotations

from collections.abc import Callable

from .model import PendingJob
from .shapes import JobInfo


def unsearched_reason(head: PendingJob) -> str:
    return (f"job {head.id} of project {head.project} (priority {head.priority}) waits for a preemption search or an "
            f"evaluation again that this cycle's budget left to the next cycle; this job could be among its "
            "victims then, so it waits for it")


class Unsearched:
    """The jobs left unsearched so far in a cycle, by (project, flavor), with their positions in the cycle; under
    ("", flavor) those whose search would take preemptible jobs of any project."""

    __slots__ = ("heads", "ids")

    def __init__(self) -> None:
        self.heads: dict[tuple[str, str], list[tuple[int, PendingJob]]] = {}
        self.ids: set[int] = set()

    def add(self, position: int, job: PendingJob, info: JobInfo, takes_preemptible: bool) -> None:
        """The job at this position was left without its search or its evaluation again (once is enough)."""
        if job.id in self.ids:
            return
        self.ids.add(job.id)
        for f in info.flavors:
            self.heads.setdefault((job.project, f), []).append((position, job))
            if takes_preemptible:
                self.heads.setdefault(("", f), []).append((position, job))

    def head_over(self, job: PendingJob, info: JobInfo, position: int,
                  admitted: Callable[[int], bool]) -> PendingJob | None:
        """A job before this one in the cycle, left unsearched and not admitted since (`admitted`: by position),
        whose search may take this job on a flavor it asks for; None when there is none. (One admitted later in the
        cycle after all holds back no later job; those it held wait for the next cycle.)"""
        if not self.heads:
            return None
        heads = self.heads
        for f in info.flavors:
            for at, head in heads.get((job.project, f), ()):
                if at < position and head.priority > job.priority and not admitted(at):
                    return head
            if job.preemptible:
                for at, head in heads.get(("", f), ()):
                    if at < position and head.project != job.project and not admitted(at):
                        return head
        return None
