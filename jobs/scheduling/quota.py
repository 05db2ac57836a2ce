"""Phase 2, quota: guarantees, borrowing within a cohort, lend limits and running-job caps.

Per project p and flavor f (g = guaranteed, b = borrow_limit, l = lend_limit or infinity):
    used(p, f)      devices of p's non-preemptible jobs (running, plus admitted this cycle)
    pre(p, f)       devices of p's preemptible jobs: all of it counts as borrowed
    borrowed(p, f)  = max(0, used - g) + pre                     must stay <= b (0 when borrowing is off)
    lendable(p, f)  = min(max(0, g - used), l)                   p's idle guarantee others may borrow
Per cohort c and flavor f:
    supply(c, f)    = sum of lendable over c's projects + unowned(c, f)
    unowned(c, f)   = max(0, devices of f on schedulable nodes - sum of g over c's projects)
A job is within quota when, for each flavor, either it does not raise its project's borrowed amount (it fits in
the guarantee: always allowed, even if that takes back lent capacity, which preemption then reclaims), or after
admission borrowed(p, f) <= b and the cohort's total borrowed <= supply. Pooling lenders per cohort is exact:
any borrower may use any lender's idle guarantee, so the aggregate check is the flow feasibility check.
"""

from __future__ import annotations

from collections import defaultdict

from .model import Policy, Project, Quota

INF = float("inf")


class QuotaFailure:
    __slots__ = ("kind", "flavor")

    def __init__(self, kind: str, flavor: str = "") -> None:
        self.kind = kind  # "max_running" | "no_quota" | "borrowing_off" | "borrow_limit" | "cohort"
        self.flavor = flavor


class QuotaState:
    def __init__(self, projects: tuple[Project, ...], quotas: tuple[Quota, ...], policy: Policy,
                 flavor_totals: dict[str, int]) -> None:
        self.enabled = policy.quotas
        self.borrowing = policy.borrowing
        self.cohort: dict[str, str] = {p.name: p.cohort for p in projects}
        self.max_running: dict[str, int | None] = {p.name: p.max_running_jobs for p in projects}
        self.guar: dict[tuple[str, str], int] = {}
        self.blimit: dict[tuple[str, str], int] = {}
        self.llimit: dict[tuple[str, str], float] = {}
        for q in quotas:
            key = (q.project, q.flavor)
            self.guar[key] = self.guar.get(key, 0) + max(0, q.guaranteed)
            self.blimit[key] = self.blimit.get(key, 0) + max(0, q.borrow_limit)
            self.llimit[key] = INF if q.lend_limit is None else max(0, q.lend_limit)
        self.used: dict[tuple[str, str], int] = defaultdict(int)
        self.pre: dict[tuple[str, str], int] = defaultdict(int)
        self.running: dict[str, int] = defaultdict(int)
        # Usage of jobs running at the start of the cycle only (victims removed): decides who is "borrowing"
        # when looking for victims, so a job admitted this cycle never turns its project's older jobs into
        # reclaim victims within the same cycle.
        self.run_used: dict[tuple[str, str], int] = defaultdict(int)
        self.run_pre: dict[tuple[str, str], int] = defaultdict(int)
        self.supply: dict[tuple[str, str], float] = defaultdict(float)
        self.borrowed_total: dict[tuple[str, str], int] = defaultdict(int)
        owned: dict[tuple[str, str], int] = defaultdict(int)
        for (project, flavor), g in self.guar.items():
            owned[(self.cohort_of(project), flavor)] += g
            self.supply[(self.cohort_of(project), flavor)] += self._lendable(project, flavor)
        cohorts = {self.cohort_of(p) for p, _ in self.guar} | set(self.cohort.values())
        for c in cohorts:
            for flavor, total in flavor_totals.items():
                self.supply[(c, flavor)] += max(0, total - owned.get((c, flavor), 0))

    def cohort_of(self, project: str) -> str:
        return self.cohort.get(project, project)

    def _lendable(self, project: str, flavor: str) -> float:
        key = (project, flavor)
        idle = max(0, self.guar.get(key, 0) - self.used[key])
        return min(idle, self.llimit.get(key, INF))

    def borrowed(self, project: str, flavor: str) -> int:
        key = (project, flavor)
        return max(0, self.used[key] - self.guar.get(key, 0)) + self.pre[key]

    def change(self, project: str, demand: dict[str, int], preemptible: bool, sign: int,
               at_start: bool = False) -> int:
        """Add (sign=1) or remove (sign=-1) a job's usage; returns the change in its project's borrowed devices."""
        delta_borrowed = 0
        cohort = self.cohort_of(project)
        for flavor, devices in demand.items():
            key = (project, flavor)
            before_b = self.borrowed(project, flavor)
            before_l = self._lendable(project, flavor)
            if preemptible:
                self.pre[key] += sign * devices
                if at_start:
                    self.run_pre[key] += sign * devices
            else:
                self.used[key] += sign * devices
                if at_start:
                    self.run_used[key] += sign * devices
            after_b = self.borrowed(project, flavor)
            self.borrowed_total[(cohort, flavor)] += after_b - before_b
            self.supply[(cohort, flavor)] += self._lendable(project, flavor) - before_l
            delta_borrowed += after_b - before_b
        self.running[project] += sign
        return delta_borrowed

    def load_running(self, used: dict[tuple[str, str], int], pre: dict[tuple[str, str], int],
                     running: dict[str, int]) -> None:
        """Add the usage of the jobs running at the start of the cycle in one step, aggregated per (project,
        flavor): the same state as one `change(..., 1, at_start=True)` per job (borrowed_total and supply are
        sums over (project, flavor) of functions of its final usage, so per-job increments telescope), with one
        update per key instead of one per job. Call it once, on a fresh state."""
        for key in used.keys() | pre.keys():
            project, flavor = key
            cohort_key = (self.cohort.get(project, project), flavor)
            before_b = self.borrowed(project, flavor)
            before_l = self._lendable(project, flavor)
            u = used.get(key, 0)
            p = pre.get(key, 0)
            self.used[key] += u
            self.run_used[key] += u
            self.pre[key] += p
            self.run_pre[key] += p
            self.borrowed_total[cohort_key] += self.borrowed(project, flavor) - before_b
            self.supply[cohort_key] += self._lendable(project, flavor) - before_l
        for project, n in running.items():
            self.running[project] += n

    def check(self, project: str, demand: dict[str, int], preemptible: bool) -> QuotaFailure | None:
        """None when a job of this demand may be admitted now; quotas off means always."""
        if not self.enabled:
            return None
        cap = self.max_running.get(project)
        if cap is not None and self.running[project] >= cap:
            return QuotaFailure("max_running")
        cohort = self.cohort_of(project)
        for flavor, devices in demand.items():
            key = (project, flavor)
            g = self.guar.get(key, 0)
            used = self.used[key]
            pre = self.pre[key]
            new_used = used if preemptible else used + devices
            new_pre = pre + devices if preemptible else pre
            before_b = max(0, used - g) + pre
            after_b = max(0, new_used - g) + new_pre
            if after_b <= before_b:
                continue  # inside the guarantee: always allowed
            if key not in self.guar and not self.borrowing:
                return QuotaFailure("no_quota", flavor)
            if not self.borrowing:
                return QuotaFailure("borrowing_off", flavor)
            if after_b > self.blimit.get(key, 0):
                return QuotaFailure("borrow_limit" if key in self.guar else "no_quota", flavor)
            lendable_after = min(max(0, g - new_used), self.llimit.get(key, INF))
            supply = self.supply[(cohort, flavor)] - self._lendable(project, flavor) + lendable_after
            if self.borrowed_total[(cohort, flavor)] - before_b + after_b > supply:
                return QuotaFailure("cohort", flavor)
        return None

    def within_guarantee(self, project: str, demand: dict[str, int]) -> bool:
        """Would a non-preemptible job of this demand stay inside its project's guarantee on every flavor?"""
        if not self.enabled:
            return False
        return all(self.used[(project, f)] + d <= self.guar.get((project, f), 0) for f, d in demand.items())

    def run_borrowing(self, project: str, flavor: str) -> bool:
        """Is the project over its guarantee on this flavor with jobs that were running when the cycle began?"""
        key = (project, flavor)
        return self.run_used[key] > self.guar.get(key, 0)

    def idle_supply(self, project: str, flavor: str) -> float:
        """What the cohort could still lend to this project on this flavor (for explanations)."""
        cohort = self.cohort_of(project)
        return max(0.0, self.supply[(cohort, flavor)] - self.borrowed_total[(cohort, flavor)])
