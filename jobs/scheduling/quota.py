"""Phase 2, quota: guarantees, borrowing within an organization, lend limits and running-job caps.

Per project p and flavor f (g = guaranteed, b = borrow_limit, l = lend_limit or infinity):
    used(p, f)      devices of p's non-preemptible jobs (running, plus admitted this cycle)
    pre(p, f)       devices of p's preemptible jobs
    borrowed(p, f)  = max(0, used + pre - g)                     must stay <= b (0 when borrowing is off)
    held(p, f)      what p held or asked for in the last Policy.lend_hold seconds, or holds and its waiting jobs
                    ask for now (lending.py; 0 if none); waiting(p, f) the second alone
    lendable(p, f)  = min(max(0, g - max(used + pre, held)), l)  p's idle guarantee others may borrow
    lendable_w(p, f) = the same with waiting(p, f) for held        what is not kept for demand now
A preemptible job uses its own project's idle guarantee first, like any job, and borrows only above it; its
project's non-preemptible jobs take the guarantee back by priority preemption.

Borrowing stays inside the organization (the cohort): a project borrows its cohort's lendable capacity, and
capacity nobody is guaranteed, never another organization's guarantee. Per cohort c and flavor f:
    lend(c, f)      = sum of lendable over c's projects;  lend_w(c, f) = sum of lendable_w over them
    r(c, f)         = borrowed(c, f) - lend(c, f)      what c's borrowing takes beyond what its lenders may lend
    r_w(c, f)       = borrowed(c, f) - lend_w(c, f)    the same, with only the waiting jobs' holds
    claim(c, f)     = max(0, r(c, f))                  what it takes of the capacity nobody is guaranteed
and per flavor:
    unowned(f)      = max(0, devices of f on schedulable nodes - sum of every project's g)
    excess(f)       = sum over cohorts of claim(c, f)                        must stay <= unowned(f)
A job is within quota when, for each flavor f it asks for (others(f) = excess(f) less c's own claim):
  - above its project's guarantee: borrowing is on, borrowed(p, f) <= b after admission, and r' = r(c, f) after
    admission is covered by its cohort's lenders or fits in the unowned capacity other cohorts leave: r' <= 0  or
    others(f) + r' <= unowned(f). Else it fails ("cohort" for the last);
  - inside it: the same with r_w' = r_w(c, f) after admission. Else it fails as "lent": its project lent that
    guarantee to its cohort's borrowers and the cohort has nothing else to give them, so preemption takes it back
    from them, rather than admitting the job onto devices another organization is guaranteed.
Lend limits and lend holds keep part of a guarantee from borrowers, never from its own project: what a cohort's
borrowers take beyond what its lenders may lend comes from the unowned capacity, as much as what it holds beyond
its guarantees does (r >= r_w >= held - guaranteed, since lend <= lend_w <= the cohort's idle guarantee). What a
project's recent use holds is a guess that it comes back, so it makes borrowers wait and nothing more: a job within
its guarantee may run on what a sibling's recent use keeps idle, where counting it made the job preempt a borrower
for it (24 more reclaims on the Philly week, bench_policy.py). What waiting jobs hold is demand now, and counts for
both: running on it would only move the reclaim to the sibling. A cohort whose borrowing its own lenders cover is
never held back by another cohort's claim (a lost node, a guarantee raised).
Pooling lenders per cohort and the unowned capacity across cohorts is exact: any borrower may use any lender of its
cohort and any unowned device, so the aggregate check is the flow feasibility check.

Monotone, as preemption's bounds and the remembered answers need: r, r_w, r', r_w' and others(f) only fall when any
project's usage falls and only rise with the job's devices. So removing running jobs never turns a pass into a
failure, nor does a smaller demand; raising usage never turns a failure into a pass.
"""

from __future__ import annotations

from collections import defaultdict

from .model import Policy, Project, Quota

INF = float("inf")
NOTHING: dict[str, int] = {}  # no extra usage (QuotaState.check); never written


def lendable(guaranteed: int, held: int, recent: int, lend_limit: float) -> float:
    """What a project holding `held` devices of a flavor, `recent` of them in the lend hold's window, lends: its
    idle guarantee above both, up to its lend limit (conditionals, not max()/min(): quota checks call this for
    most waiting jobs)."""
    idle = guaranteed - (held if held > recent else recent)
    if idle <= 0:
        return 0
    return idle if idle < lend_limit else lend_limit


class QuotaFailure:
    __slots__ = ("kind", "flavor", "short")

    def __init__(self, kind: str, flavor: str = "", short: float = 0.0) -> None:
        # "max_running" | "no_quota" | "borrowing_off" | "borrow_limit" | "cohort" (it would borrow what its cohort
        # cannot lend) | "lent" (inside its guarantee, which its cohort lent to borrowers it cannot otherwise cover)
        self.kind = kind
        self.flavor = flavor
        # A cohort or lent failure: the fewest devices other projects would have to give back before the job's
        # demand of that flavor passes (fast.preemption.could_pass_quota_without): each device given back lowers the
        # cohorts' excess over the unowned capacity, and the job's cohort's own excess, by one at most.
        self.short = short


COHORT_KINDS = ("cohort", "lent")  # failures of what a cohort can lend, which other projects' removals may cure


class Answers:
    """check_demand's memory for one set of values check() reads: the most devices that passed, the fewest that
    failed and how."""

    __slots__ = ("passed", "failed", "failure")

    def __init__(self) -> None:
        self.passed = -1
        self.failed = 0
        self.failure: QuotaFailure | None = None


class QuotaState:
    def __init__(self, projects: tuple[Project, ...], quotas: tuple[Quota, ...], policy: Policy,
                 flavor_totals: dict[str, int]) -> None:
        self.enabled = policy.quotas
        self.borrowing = policy.borrowing
        self.hold = policy.lend_hold
        self.cohort: dict[str, str] = {p.name: p.cohort for p in projects}
        self.members: dict[str, list[str]] = {}  # cohort -> its projects
        for p in projects:
            self.members.setdefault(p.cohort, []).append(p.name)
        self.max_running: dict[str, int | None] = {p.name: p.max_running_jobs for p in projects}
        self.guar: dict[tuple[str, str], int] = {}
        self.blimit: dict[tuple[str, str], int] = {}
        self.llimit: dict[tuple[str, str], float] = {}
        self.held: dict[tuple[str, str], int] = {}  # (project, flavor) -> recent demand kept from lending
        self.waiting: dict[tuple[str, str], int] = {}  # (project, flavor) -> the part of it its waiting jobs ask
        self.totals = flavor_totals  # devices of schedulable nodes per flavor
        self.flavors_of: dict[str, set[str]] = defaultdict(set)  # project -> flavors it is guaranteed or uses
        self.changes: dict[str, int] = defaultdict(int)  # project -> how many times its usage changed
        # Names the current usage (devices and running jobs): a fresh number at every change, or the number of an
        # earlier usage the state is back at (`restore`), so caches stamped with it stay exact.
        self.version = 0
        self._last_version = 0
        # Edits that lowered some usage so far (the rest only raise it, which never loosens a quota): a quota
        # failure of a project whose own usage did not change since stays the same failure (check_demand).
        self.loosened = 0
        self.cache = True  # check_demand remembers its answers (False: the plain check, to compare against)
        self._checked: dict[tuple, tuple[int, QuotaFailure | None, int, int]] = {}  # see check_demand
        self._answers: dict[tuple, Answers] = {}  # see check_demand
        self._lending: dict[tuple[str, str], tuple[int, tuple[int, int, int, int]]] = {}  # lending(), as of a version
        self.guaranteed_total: dict[str, int] = defaultdict(int)  # project -> sum of its guarantees
        for q in quotas:
            key = (q.project, q.flavor)
            self.guar[key] = self.guar.get(key, 0) + max(0, q.guaranteed)
            self.blimit[key] = self.blimit.get(key, 0) + max(0, q.borrow_limit)
            self.llimit[key] = INF if q.lend_limit is None else max(0, q.lend_limit)
            self.flavors_of[q.project].add(q.flavor)
            self.guaranteed_total[q.project] += max(0, q.guaranteed)
        self.used: dict[tuple[str, str], int] = defaultdict(int)
        self.pre: dict[tuple[str, str], int] = defaultdict(int)
        self.running: dict[str, int] = defaultdict(int)
        # Non-preemptible usage of the jobs that run (those running when the cycle began, victims removed, and those
        # admitted since), without the reserved heads counted in (shift): who is "borrowing" when looking for
        # victims. A reserved head holds no device a reclaim could free.
        self.run_used: dict[tuple[str, str], int] = defaultdict(int)
        self.lend: dict[tuple[str, str], float] = defaultdict(float)  # (cohort, flavor) -> lendable of members
        self.lend_w: dict[tuple[str, str], float] = defaultdict(float)  # the same with the waiting jobs' holds only
        self.borrowed_total: dict[tuple[str, str], int] = defaultdict(int)  # (cohort, flavor) -> borrowed
        self.excess: dict[str, float] = defaultdict(float)  # flavor -> sum over cohorts of claim(c, f)
        guaranteed: dict[str, int] = defaultdict(int)
        for (project, flavor), g in self.guar.items():
            guaranteed[flavor] += g
            self.lend[(self.cohort_of(project), flavor)] += self._lendable(project, flavor)
            self.lend_w[(self.cohort_of(project), flavor)] += self._lendable(project, flavor)
        self.unowned: dict[str, int] = {f: max(0, total - guaranteed[f]) for f, total in flavor_totals.items()}

    def hold_back(self, held: dict[tuple[str, str], int], waiting: dict[tuple[str, str], int]) -> None:
        """Keep each (project, flavor)'s recent demand from lending (lending.lend_holds), `waiting` the part of it
        its waiting jobs ask for (lending.waiting_holds); call it on a fresh state, before load_running."""
        for key, devices in held.items():
            cohort_key = (self.cohort_of(key[0]), key[1])
            before, before_w = self._lendable(*key), self._lendable(*key, waiting=True)
            self.held[key] = devices
            if waiting.get(key):
                self.waiting[key] = waiting[key]
            self._shift_cohort(cohort_key, 0, self._lendable(*key) - before,
                               self._lendable(*key, waiting=True) - before_w)

    def binding_holds(self) -> set[tuple[str, str]]:
        """(project, flavor) keys whose lend hold keeps back part of an idle guarantee right now."""
        return {key for key, devices in self.held.items()
                if devices > self.used[key] + self.pre[key] and self.guar.get(key, 0) > self.used[key] + self.pre[key]}

    def cohort_of(self, project: str) -> str:
        return self.cohort.get(project, project)

    def _lendable(self, project: str, flavor: str, waiting: bool = False) -> float:
        key = (project, flavor)
        return lendable(self.guar.get(key, 0), self.used[key] + self.pre[key],
                        (self.waiting if waiting else self.held).get(key, 0), self.llimit.get(key, INF))

    def borrowed(self, project: str, flavor: str) -> int:
        key = (project, flavor)
        return max(0, self.used[key] + self.pre[key] - self.guar.get(key, 0))

    def _add(self, project: str, flavor: str, used: int, pre: int) -> int:
        """Add usage to one (project, flavor), keeping the cohort's sums and the flavor's excess; returns the change
        in the project's borrowed devices."""
        # borrowed(), _lendable() and _excess() written out, before and after, with conditionals rather than
        # max()/min() calls: preemption's bounds and simulated removals and counting reserved heads in and out
        # call this thousands of times a cycle.
        key = (project, flavor)
        cohort_key = (self.cohort.get(project, project), flavor)
        g, lend_limit, hold = self.guar.get(key, 0), self.llimit.get(key, INF), self.held.get(key, 0)
        wait_hold = self.waiting.get(key, 0)
        used_now, pre_now = self.used, self.pre
        total = used_now[key] + pre_now[key]
        after = total + used + pre
        used_now[key] += used
        pre_now[key] += pre
        self.flavors_of[project].add(flavor)
        self.changes[project] += 1
        self._last_version += 1
        self.version = self._last_version
        if used < 0 or pre < 0:
            self.loosened += 1
        delta = (after - g if after > g else 0) - (total - g if total > g else 0)
        lend_delta = lendable(g, after, hold, lend_limit) - lendable(g, total, hold, lend_limit)
        lend_w_delta = lendable(g, after, wait_hold, lend_limit) - lendable(g, total, wait_hold, lend_limit)
        if delta or lend_delta or lend_w_delta:
            self._shift_cohort(cohort_key, delta, lend_delta, lend_w_delta)
        return delta

    def _shift_cohort(self, cohort_key: tuple[str, str], borrowed: int, lend: float, lend_w: float) -> None:
        """Move a cohort's borrowed and lendable sums, and the flavor's excess with its claim."""
        borrowed_total, lend_total = self.borrowed_total, self.lend
        before = borrowed_total[cohort_key] - lend_total[cohort_key]
        borrowed_total[cohort_key] += borrowed
        lend_total[cohort_key] += lend
        self.lend_w[cohort_key] += lend_w
        after = before + borrowed - lend
        if before > 0 or after > 0:
            self.excess[cohort_key[1]] += (after if after > 0 else 0) - (before if before > 0 else 0)

    def beyond_lenders_with(self, project: str, flavor: str, devices: int, waiting: bool = False) -> float:
        """r'(c, f) of the project's cohort once the project holds `devices` more of the flavor (what a borrower is
        checked against); with `waiting`, r_w'(c, f) (what a job within its guarantee is checked against)."""
        key = (project, flavor)
        cohort_key = (self.cohort_of(project), flavor)
        g, lend_limit = self.guar.get(key, 0), self.llimit.get(key, INF)
        hold = (self.waiting if waiting else self.held).get(key, 0)
        total = self.used[key] + self.pre[key]
        after = total + devices
        borrowed = (after - g if after > g else 0) - (total - g if total > g else 0)
        lend = lendable(g, after, hold, lend_limit) - lendable(g, total, hold, lend_limit)
        lenders = self.lend_w[cohort_key] if waiting else self.lend[cohort_key]
        return self.borrowed_total[cohort_key] - lenders + borrowed - lend

    def keeps_room(self, project: str, flavor: str, devices: int, arriving: int) -> bool:
        """Whether the project may hold `devices` more of the flavor and its cohort still hold it once its projects
        ask for `arriving` more (what they take from the guarantees it lends, or borrow themselves): the cohort's
        borrowing beyond its lenders stays within the unowned capacity other cohorts leave."""
        beyond = self.beyond_lenders_with(project, flavor, devices) + arriving
        if beyond <= 0 or not self.enabled:
            return True
        return self._beyond_own(flavor, (self.cohort_of(project), flavor), beyond, "cohort") is None

    def beyond_lenders(self, cohort: str, flavor: str) -> float:
        """r(c, f): what the cohort's borrowing takes beyond what its lenders may lend (negative: they could lend
        that much more)."""
        cohort_key = (cohort, flavor)
        return self.borrowed_total[cohort_key] - self.lend[cohort_key]

    def change(self, project: str, demand: dict[str, int], preemptible: bool, sign: int, job: bool = True) -> int:
        """Add (sign=1) or remove (sign=-1) a job's usage; returns the change in its project's borrowed devices.
        `job` False: devices alone (a grown replica of an elastic job), no running job."""
        delta_borrowed = 0
        for flavor, devices in demand.items():
            key = (project, flavor)
            if preemptible:
                delta_borrowed += self._add(project, flavor, 0, sign * devices)
            else:
                delta_borrowed += self._add(project, flavor, sign * devices, 0)
                self.run_used[key] += sign * devices
        if job:
            self._count_jobs(project, sign)  # a job of no device changes the running count alone
        return delta_borrowed

    def load_running(self, used: dict[tuple[str, str], int], pre: dict[tuple[str, str], int],
                     running: dict[str, int]) -> None:
        """Add the usage of the jobs running at the start of the cycle in one step, aggregated per (project,
        flavor): the same state as one `change(..., 1)` per job, with one update per key instead
        of one per job. Call it once, on a fresh state."""
        for key in used.keys() | pre.keys():
            project, flavor = key
            u, p = used.get(key, 0), pre.get(key, 0)
            self._add(project, flavor, u, p)
            self.run_used[key] += u
        for project, n in running.items():
            self.running[project] += n

    def shift(self, project: str, devices: dict[str, int], jobs: int, sign: int) -> None:
        """Add (sign=1) or remove (sign=-1) non-preemptible usage and running jobs that belong to no job: a
        reserved head counted in while later jobs are checked (state.QuotaHold)."""
        for flavor, d in devices.items():
            if d:
                self._add(project, flavor, sign * d, 0)
        if jobs:
            self._count_jobs(project, sign * jobs)

    def _count_jobs(self, project: str, jobs: int) -> None:
        self.running[project] += jobs
        self.changes[project] += 1
        self._last_version += 1
        self.version = self._last_version
        if jobs < 0:
            self.loosened += 1

    def mark(self) -> tuple[int, int]:
        """What names the current usage, for `restore`."""
        return self.version, self.loosened

    def restore(self, mark: tuple[int, int]) -> None:
        """The usage is back to what `mark` named (every edit since was undone exactly and nothing else
        changed): name it so again, so that answers cached then hold again."""
        self.version, self.loosened = mark

    def check(self, project: str, demand: dict[str, int], preemptible: bool,
              extra: tuple[dict[str, int], int] | None = None) -> QuotaFailure | None:
        """None when a job of this demand may be admitted now; quotas off means always. Preemptible or not, the
        same rules apply. `extra`: (non-preemptible devices per flavor, running jobs) the project is checked as
        if it also held (its reserved heads: state.CycleState.failure_beside), the state left as it is."""
        if not self.enabled:
            return None
        more, more_jobs = extra if extra is not None else (NOTHING, 0)
        cap = self.max_running.get(project)
        if cap is not None and self.running[project] + more_jobs >= cap:
            return QuotaFailure("max_running")
        cohort = self.cohort.get(project, project)
        guar, used, pre = self.guar, self.used, self.pre
        for flavor, devices in demand.items():
            key = (project, flavor)
            g = guar.get(key, 0)
            held = used[key] + pre[key]  # what the project holds
            x = more.get(flavor, 0) if more else 0
            before_total = held + x
            if devices <= 0:
                continue
            after_total = before_total + devices
            cohort_key = (cohort, flavor)
            inside = after_total <= g
            if not inside:
                if key not in guar and not self.borrowing:
                    return QuotaFailure("no_quota", flavor)
                if not self.borrowing:
                    return QuotaFailure("borrowing_off", flavor)
                if after_total - g > self.blimit.get(key, 0):
                    return QuotaFailure("borrow_limit" if key in guar else "no_quota", flavor)
            borrowed = self.borrowed_total[cohort_key]
            if inside and not borrowed and not x:
                continue  # inside the guarantee, and nobody of its cohort borrows: most such jobs
            # r' (what the cohort's borrowing takes beyond its lenders with this job in), its project's terms
            # (_lendable) written out: most waiting jobs of a full cluster are checked up to here.
            # A job within its guarantee is checked against r_w', a borrower against r' (the module's docstring).
            lend_limit = self.llimit.get(key, INF)
            hold = (self.waiting if inside else self.held).get(key, 0)
            lend = self.lend_w[cohort_key] if inside else self.lend[cohort_key]
            before_b = before_total - g if before_total > g else 0
            after_b = after_total - g if after_total > g else 0
            lendable_before = lendable(g, before_total, hold, lend_limit)
            if x:  # the extra usage moves the cohort's sums as _add would
                borrowed += before_b - (held - g if held > g else 0)
                lend += lendable_before - lendable(g, held, hold, lend_limit)
            beyond = borrowed + after_b - before_b - (lend - lendable_before + lendable(g, after_total, hold,
                                                                                         lend_limit))
            if beyond > 0:
                failure = self._beyond_own(flavor, cohort_key, beyond, "lent" if inside else "cohort")
                if failure is not None:
                    return failure
        return None

    def _beyond_own(self, flavor: str, cohort_key: tuple[str, str], beyond: float, kind: str) -> QuotaFailure | None:
        """A cohort would take `beyond` > 0 devices of the flavor more than its own (what it owns, or its lenders
        lend): None when the unowned capacity other cohorts leave holds it, else the failure with its shortfall
        (each device other projects give back lowers both terms by one at most)."""
        own = self.borrowed_total[cohort_key] - self.lend[cohort_key]
        others = self.excess[flavor] - (own if own > 0 else 0)
        short = others + beyond - self.unowned.get(flavor, 0)
        if short <= 0:
            return None
        return QuotaFailure(kind, flavor, short if short < beyond else beyond)

    def check_without(self, project: str, demand: dict[str, int], preemptible: bool,
                      usage: tuple[dict[tuple[str, str, bool], int], int]) -> QuotaFailure | None:
        """check() as if this usage were gone: devices per (project, flavor, preemptible), and running jobs of
        the project (preemption's candidates, summed). The state is left as it was, its version included."""
        # check() reads the project's own running jobs, its cohort's sums and each flavor's excess over all
        # cohorts: another cohort's usage counts only while that cohort claims unowned capacity (r > 0).
        cohort = self.cohort_of(project)
        devices = {key: d for key, d in usage[0].items() if self.moves_checks_of(cohort, key[0], key[1])}
        jobs = usage[1]
        before = self.mark()
        for (p, flavor, pre), d in devices.items():
            self._add(p, flavor, 0 if pre else -d, -d if pre else 0)
        self.running[project] -= jobs
        failure = self.check(project, demand, preemptible)
        for (p, flavor, pre), d in devices.items():
            self._add(p, flavor, 0 if pre else d, d if pre else 0)
        self.running[project] += jobs
        self.restore(before)
        return failure

    def moves_checks_of(self, cohort: str, project: str, flavor: str) -> bool:
        """Can the project's usage of the flavor move a quota check of a job of this cohort? Its own organization's
        can; another organization's only while that one takes more than its lenders lend (r > 0), which removing
        usage never raises (docs/scheduling-invariants.md, F9)."""
        other = self.cohort_of(project)
        return other == cohort or self.beyond_lenders(other, flavor) > 0

    def check_demand(self, project: str, demand_key: tuple, demand: dict[str, int]) -> QuotaFailure | None:
        """check(), remembered: a cycle checks job after job of a project that all wait. `demand_key` is
        JobInfo.demand_key. An answer holds for the same (project, demand) while the usage is the same (its
        version); past that:

        A demand of one flavor f is answered from what check() reads of the state: the project's running jobs
        and its usage of f, its cohort's lendable and borrowed f, and the excess on f. For those
        values, the answers over the number of devices are monotone: what a demand that passed asks for or less
        passes (inside the guarantee, or under the borrow limit and what the cohort can lend), and what a demand
        that failed asks for or more fails, for the same reason but two: a cohort failure turns into the borrow
        limit's once the project would borrow more than that, and a lent one (inside the guarantee) into any
        failure of borrowing once the demand leaves the guarantee. So each set of values keeps the largest demand
        that passed and the smallest that failed, and most jobs of a waiting project need no check at all."""
        if not self.cache:
            return self.check(project, demand, False)
        key = (project, demand_key)
        cached = self._checked.get(key)
        if cached is not None:
            version, answer, loosened, changes = cached
            if version == self.version:
                return answer
            # A failure of one flavor stays the same failure while nothing lowered any usage and the project's
            # own did not move: other projects' usage only rose, which only lowers what its cohort can lend.
            if answer is not None and loosened == self.loosened and changes == self.changes[project] and \
                    len(demand_key) == 2:
                return answer
        answer = self._check_one(project, demand_key, demand) if len(demand_key) == 2 else \
            self.check(project, demand, False)
        self._checked[key] = (self.version, answer, self.loosened, self.changes[project])
        return answer

    def _check_one(self, project: str, demand_key: tuple, demand: dict[str, int]) -> QuotaFailure | None:
        """check_demand of one flavor, from the values check() reads (see check_demand)."""
        flavor, devices = demand_key
        key = (project, flavor)
        cohort_key = (self.cohort.get(project, project), flavor)
        values = (key, self.running[project], self.used[key] + self.pre[key], self.lend[cohort_key],
                  self.lend_w[cohort_key],
                  self.borrowed_total[cohort_key], self.excess[flavor])
        known = self._answers.get(values)
        if known is None:
            known = self._answers[values] = Answers()
        elif devices <= known.passed:
            return None
        elif known.failure is not None and devices >= known.failed:
            kind, g = known.failure.kind, self.guar.get(key, 0)
            if kind == "cohort" and max(0, values[2] + devices - g) > self.blimit.get(key, 0):
                return QuotaFailure("borrow_limit" if key in self.guar else "no_quota", flavor)
            if kind != "lent" or values[2] + devices <= g:
                return known.failure
            # A demand inside the guarantee failed on what its cohort lent; this one would borrow: checked afresh.
        answer = self.check(project, demand, False)
        if answer is None:
            known.passed = devices
        elif known.failure is None or devices < known.failed:
            known.failed, known.failure = devices, answer
        return answer

    def would_borrow(self, project: str, demand: dict[str, int], preemptible: bool) -> bool:
        """Would admitting this job take its project above its guarantee on some flavor? A non-preemptible job
        counts only its project's non-preemptible use: it takes the rest back from its own preemptible jobs."""
        if not self.enabled:
            return False
        used, pre, guar = self.used, self.pre, self.guar
        for f, d in demand.items():
            key = (project, f)
            if used[key] + (pre[key] if preemptible else 0) + d > guar.get(key, 0):
                return True
        return False

    def limit(self, project: str, flavor: str) -> int:
        """The most devices of `flavor` the project's jobs may hold: its guarantee, plus its borrow limit when
        borrowing is on (whether its cohort has that much to lend is another matter)."""
        key = (project, flavor)
        return self.guar.get(key, 0) + (self.blimit.get(key, 0) if self.borrowing else 0)

    def within_guarantee(self, project: str, demand: dict[str, int]) -> bool:
        """Would a non-preemptible job of this demand stay inside its project's guarantee on every flavor (its
        project's preemptible jobs aside: priority preemption takes the guarantee back from them)?"""
        if not self.enabled:
            return False
        used, guar = self.used, self.guar
        for f, d in demand.items():  # a loop, not all() over a generator: asked for most waiting jobs
            key = (project, f)
            if used[key] + d > guar.get(key, 0):
                return False
        return True

    def run_borrowing(self, project: str, flavor: str) -> bool:
        """Is the project over its guarantee on this flavor with the non-preemptible jobs that run now, those admitted
        this cycle included (as Kueue counts a workload's usage from its admission)? Its preemptible jobs are victims
        anyway; a reserved head counted in runs nothing."""
        key = (project, flavor)
        return self.run_used[key] > self.guar.get(key, 0)

    def lending(self, project: str, flavor: str) -> tuple[int, int, int, int]:
        """(lenders, limited, held, unowned) for a project of this flavor, for explanations: the idle guarantee of
        the other projects of its cohort not yet borrowed, the idle guarantee their lend limits keep back, what
        the lend hold keeps back (their recent demand), and the capacity nobody is guaranteed that other
        borrowing leaves."""
        cached = self._lending.get((project, flavor))
        if cached is not None and cached[0] == self.version:
            return cached[1]
        cohort = self.cohort_of(project)
        cohort_key = (cohort, flavor)
        others = self.lend[cohort_key] - self._lendable(project, flavor)
        lenders = max(0.0, others - self.borrowed_total[cohort_key])
        idle = unheld = 0
        for p in self.members.get(cohort, ()):
            if p != project:
                key = (p, flavor)
                total = self.used[key] + self.pre[key]
                idle += max(0, self.guar.get(key, 0) - total)
                unheld += max(0, self.guar.get(key, 0) - max(total, self.held.get(key, 0)))
        # check()'s terms: the unowned capacity other cohorts' claims leave, less what its borrowers take beyond
        # the other projects' lending (once this project uses its own idle guarantee, that comes from there too).
        borrowed = self.borrowed_total[cohort_key]
        own_claim = max(0.0, borrowed - self.lend[cohort_key])
        unowned = max(0.0, self.unowned.get(flavor, 0) - (self.excess[flavor] - own_claim)
                      - max(0.0, borrowed - others))
        found = int(lenders), int(unheld - others), int(idle - unheld), int(unowned)
        self._lending[(project, flavor)] = (self.version, found)
        return found
