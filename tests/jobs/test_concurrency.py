"""Concurrent submissions, cancellations and two scheduler loops on PostgreSQL never over-allocate a node, never
put a project above guarantee + borrow limit, and never admit a job twice; a victim a backend claims while the
cycle preempts it is still preempted; quota edits racing the scheduler never let a cycle admit beyond the quota it
read, checked inside the transaction of every admission (`AdmissionAudit`)."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from django.db import connection, connections, transaction

from core.errors import InvalidTransition
from jobs.loop import run_once
from jobs.models import Attempt, Job, JobEvent
from jobs.services import job_cancel
from jobs.states import HOLDING
from quotas.models import Quota
from tests.jobs.conftest import submit

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("concurrency is tested on PostgreSQL (CI sets DATABASE_URL); SQLite serializes all writers")


def in_thread(func, *args):
    def run():
        try:
            func(*args)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_parallel_submissions_cancellations_and_two_schedulers(tenant, inventory):
    rng = random.Random(7)
    stop = threading.Event()
    errors: list[BaseException] = []

    def guard(func):
        def wrapped(*args):
            try:
                func(*args)
            except BaseException as error:  # surfaced below: a thread's failure must fail the test
                errors.append(error)
        return wrapped

    @guard
    def submitter(seed: int):
        local = random.Random(seed)
        for i in range(8):
            project = tenant.project if local.random() < 0.6 else inventory["speech"]
            user = "member" if project == tenant.project else "owner"
            submit(tenant, inventory["h100"], project=project, user=user, name=f"j{seed}-{i}",
                   replicas=local.choice([1, 1, 2]), devices=local.choice([2, 4, 8]))

    @guard
    def scheduler():
        while not stop.is_set():
            run_once()

    @guard
    def canceller():
        while not stop.is_set():
            ids = list(Job.objects.filter(state__in=["queued", "admitted", "dispatching"]).values_list("id", flat=True))
            if ids:
                job = Job.objects.select_related("project").get(pk=rng.choice(ids))
                with contextlib.suppress(InvalidTransition):
                    job_cancel(actor=tenant.users["owner"], job=job)

    schedulers = [in_thread(scheduler) for _ in range(2)]
    cancel = in_thread(canceller)
    submitters = [in_thread(submitter, seed) for seed in range(4)]
    for thread in submitters:
        thread.join(timeout=120)
    for _ in range(3):
        run_once()
    stop.set()
    for thread in [*schedulers, cancel]:
        thread.join(timeout=60)
    assert errors == []

    per_node: Counter = Counter()
    per_project: Counter = Counter()
    for job in Job.objects.filter(state__in=HOLDING).select_related("project", "current_attempt"):
        per_project[job.project.slug] += job.total_devices
        for a in job.current_attempt.placement:
            per_node[a["node"]] += a["devices"]
    assert all(used <= 8 for used in per_node.values()), per_node
    for quota in Quota.objects.filter(flavor=inventory["h100"]).select_related("project"):
        assert per_project[quota.project.slug] <= quota.guaranteed + quota.borrow_limit
    assert Job.objects.count() == 32
    admissions = Counter(JobEvent.objects.filter(to_state="admitted").values_list("job_id", flat=True))
    attempts = dict(Job.objects.values_list("id", "attempt"))
    assert all(count <= attempts[job_id] for job_id, count in admissions.items()), "a job was admitted twice"
    opened = Counter(Attempt.objects.values_list("job_id", flat=True))
    assert opened == admissions, "every admission opened exactly one attempt"
    assert Attempt.objects.filter(ended_at__isnull=True).count() == Job.objects.filter(state__in=HOLDING).count()
    assert sum(admissions.values()) > 0


def node_usage() -> Counter:
    """Devices each node holds for the jobs holding capacity, read from their current attempts."""
    used: Counter = Counter()
    for job in Job.objects.filter(state__in=HOLDING).select_related("current_attempt"):
        for replica in job.current_attempt.placement:
            used[replica["node"]] += replica["devices"]
    return used


def test_a_victim_claimed_by_its_backend_while_the_cycle_preempts_it_is_still_preempted(tenant, inventory,
                                                                                        monkeypatch):
    """The cycle reads a victim as admitted; before it preempts it, a backend's claim (admitted -> dispatching)
    commits. The victim still holds its devices, so it must still be preempted: skipping it would put the job it
    makes room for on devices it holds."""
    from jobs import lifecycle
    from jobs.lifecycle import transition
    from jobs.states import State
    from tests.jobs.conftest import admit

    monkeypatch.setattr(lifecycle.ports, "dispatch", lambda attempt_id: None)  # the test claims, when it chooses
    nodes = ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]
    victims = [admit(submit(tenant, inventory["h100"], project=inventory["speech"], user="owner", devices=8,
                            priority="preemptible", name=f"spare-{node}"), inventory["cluster"], [node])
               for node in nodes]
    urgent = submit(tenant, inventory["h100"], devices=8, name="urgent")  # inside vision's idle guarantee
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        scheduler_pid = cursor.fetchone()[0]
    claimed, errors = threading.Event(), []

    def backend_claims():
        """Claim every victim in one transaction, and commit only once the cycle waits for those rows."""
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                for job in victims:
                    transition(Job.objects.get(pk=job.pk), State.DISPATCHING, reason="claimed", actor="backend")
                claimed.set()
                for _ in range(200):
                    cursor.execute("SELECT pg_stat_clear_snapshot()")  # else the view is read once per transaction
                    cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [scheduler_pid])
                    if cursor.fetchone()[0] == "Lock":
                        break
                    time.sleep(0.05)
                else:
                    errors.append("the cycle never waited for the claimed rows")
        except BaseException as error:  # surfaced below
            errors.append(error)
            claimed.set()

    claimer = in_thread(backend_claims)
    assert claimed.wait(timeout=30)
    result = run_once()
    claimer.join(timeout=30)
    assert errors == []
    assert result.preemptions and urgent.pk in {a.job_id for a in result.admits}
    assert all(used <= 8 for used in node_usage().values()), node_usage()
    preempted = Job.objects.filter(pk__in=[p.victim_id for p in result.preemptions])
    assert {job.state for job in preempted} == {State.QUEUED}


class AdmissionAudit:
    """Checks every scheduler admission, inside the transaction that makes it, against the quotas the same cycle
    read: after the admission, no project may hold more of a flavor it was admitted on than that cycle's guarantee
    + borrow limit (borrowing is on), and no node more than its devices. A project may stay above a quota lowered
    under its running jobs; it may not be admitted more there.

    `read` wraps `jobs.loop.build_snapshot` (it keeps the limits the cycle read); the instance itself is an
    `on_change` listener."""

    def __init__(self) -> None:
        self.limits: dict[tuple[str, str], int] = {}
        self.cycles: list[dict] = []  # per admitting cycle: the limits read, the quota rows as of the admission
        self.violations: list[str] = []

    def read(self, build):
        def snapshot(now):
            cycle_input = build(now)
            self.limits = {(q.project, q.flavor): q.guaranteed + q.borrow_limit for q in cycle_input.snapshot.quotas}
            return cycle_input
        return snapshot

    def __call__(self, changes) -> None:
        from clusters.models import Node
        from jobs.states import State

        admitted = {c.job_id for c in changes if c.target == State.ADMITTED and c.actor == "scheduler"}
        if not admitted:
            return
        nodes = {name: (devices, flavor) for name, devices, flavor in
                 Node.objects.values_list("name", "devices", "flavor__name")}
        held: Counter = Counter()
        on_node: Counter = Counter()
        touched = set()
        for job_id, project, placement in Job.objects.filter(state__in=HOLDING).values_list(
                "id", "project__slug", "current_attempt__placement"):
            for replica in placement:
                flavor = nodes[replica["node"]][1]
                held[project, flavor] += replica["devices"]
                on_node[replica["node"]] += replica["devices"]
                if job_id in admitted:
                    touched.add((project, flavor))
        now = {(p, f): g + b for p, f, g, b in Quota.objects.values_list(
            "project__slug", "flavor__name", "guaranteed", "borrow_limit")}
        self.cycles.append({"read": dict(self.limits), "now": now, "admitted": len(admitted)})
        for key in sorted(touched):
            if held[key] > self.limits.get(key, 0):
                self.violations.append(f"{key} holds {held[key]} after an admission; the cycle read a limit of "
                                       f"{self.limits.get(key, 0)}")
        self.violations += [f"node {node} holds {used} of {nodes[node][0]}" for node, used in on_node.items()
                            if used > nodes[node][0]]


@pytest.fixture
def audit(monkeypatch) -> Iterator[AdmissionAudit]:
    from jobs import lifecycle, loop

    checker = AdmissionAudit()
    monkeypatch.setattr(loop, "build_snapshot", checker.read(loop.build_snapshot))
    with lifecycle.on_change.replaced([*lifecycle.on_change, checker]):
        yield checker


def test_the_audit_catches_an_admission_over_the_quota_the_cycle_read(tenant, inventory, audit):
    from jobs.loop import build_snapshot
    from tests.jobs.conftest import admit

    build_snapshot(time.time())  # vision may hold 16 + 8 h100
    admit(submit(tenant, inventory["h100"], replicas=3, devices=8), inventory["cluster"], ["r1-n1", "r1-n2", "r2-n1"])
    assert audit.violations == []
    admit(submit(tenant, inventory["h100"], devices=8), inventory["cluster"], ["r1-n1"])  # a node and the quota
    assert audit.violations == ["('vision', 'nvidia-h100-80gb') holds 32 after an admission; the cycle read a limit "
                                "of 24", "node r1-n1 holds 16 of 8"]


def test_quota_edits_and_cancellations_racing_the_scheduler_never_over_admit(tenant, inventory, staff_client,
                                                                              audit, settings):
    """A staff client lowers and raises vision's h100 guarantee and borrow limit while jobs are submitted, cancelled,
    dispatched, run and finish, and the scheduler cycles: every admission is within the quota its cycle read, no
    attempt is admitted twice, no cancelled job moves on."""
    from clusters.backends import observe_simulated
    from core.errors import DomainError

    settings.TIDAL = {**settings.TIDAL, "SIM_START_DELAY": 0.0}
    quota = Quota.objects.get(project=tenant.project, flavor=inventory["h100"])
    stop = threading.Event()
    errors: list[BaseException] = []
    cancelled: list[int] = []
    edits: list[tuple[int, int]] = []

    def guard(func):
        def wrapped(*args):
            try:
                func(*args)
            except BaseException as error:  # surfaced below: a thread's failure must fail the test
                errors.append(error)
                stop.set()
        return wrapped

    @guard
    def submitter(seed: int):
        local = random.Random(seed)
        while not stop.is_set():
            project, user = (tenant.project, "member") if local.random() < 0.7 else (inventory["speech"], "owner")
            with contextlib.suppress(DomainError):  # a job bigger than a lowered quota can never run: refused
                submit(tenant, inventory["h100"], project=project, user=user, name=f"s{seed}",
                       devices=local.choice([1, 2, 4, 8]), duration=local.choice([1, 2]),
                       priority=local.choice(["normal", "normal", "high", "preemptible"]))
            time.sleep(0.02)

    @guard
    def editor():
        local = random.Random(11)
        while not stop.is_set():
            values = {"guaranteed": local.choice([0, 4, 8, 16, 24]), "borrow_limit": local.choice([0, 4, 8, 16])}
            response = staff_client.patch(f"/api/v1/quotas/{quota.pk}/", values, format="json")
            assert response.status_code == 200, response.content
            edits.append((values["guaranteed"], values["borrow_limit"]))
            time.sleep(0.03)

    @guard
    def canceller():
        local = random.Random(13)
        while not stop.is_set():
            ids = list(Job.objects.filter(state__in=["queued", *HOLDING]).values_list("id", flat=True))
            if ids:
                job = Job.objects.select_related("project").get(pk=local.choice(ids))
                with contextlib.suppress(InvalidTransition):
                    job_cancel(actor=tenant.users["owner"], job=job)
                    cancelled.append(job.pk)
            time.sleep(0.05)

    @guard
    def scheduler():
        while not stop.is_set():
            run_once()  # dispatches what it admitted after commit (tasks run in-process)

    @guard
    def cluster():
        while not stop.is_set():
            observe_simulated()  # dispatching -> running -> succeeded, as the beat task does
            time.sleep(0.05)

    def raced() -> tuple[int, set, int, int]:
        """Cycles that admitted, the limits they read, edits and cancellations so far."""
        admitting = [cycle for cycle in list(audit.cycles) if cycle["admitted"]]
        limits_read = {cycle["read"].get(("vision", "nvidia-h100-80gb")) for cycle in admitting}
        return len(admitting), limits_read, len(edits), len(cancelled)

    threads = [in_thread(scheduler), in_thread(cluster), in_thread(editor), in_thread(canceller),
               *(in_thread(submitter, seed) for seed in range(3))]
    # Until the edits did race the admissions (at least 8 s, at most 60: a slow machine cycles less often).
    started = time.monotonic()
    while not stop.wait(timeout=0.5):
        admitting, limits_read, edited, cancels = raced()
        enough = admitting >= 10 and len(limits_read) >= 3 and edited >= 20 and cancels
        if time.monotonic() - started >= 60 or (enough and time.monotonic() - started >= 8):
            break
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []

    assert audit.violations == []
    admitting, limits_read, edited, cancels = raced()
    assert admitting >= 10 and len(limits_read) >= 3, (admitting, limits_read)  # the edits did race
    assert edited >= 20 and cancels

    admissions = Counter(JobEvent.objects.filter(to_state="admitted").values_list("job_id", "attempt"))
    assert set(admissions.values()) == {1}, "an attempt was admitted twice"
    assert Counter(Attempt.objects.values_list("job_id", "number")) == admissions
    cancel_events = dict(JobEvent.objects.filter(to_state="cancelled").values_list("job_id", "id"))
    assert set(cancelled) <= set(cancel_events)
    moved_on = JobEvent.objects.filter(job_id__in=cancel_events, to_state__in=[*HOLDING, "queued"]).values_list(
        "job_id", "id")
    assert [(job, event) for job, event in moved_on if event > cancel_events[job]] == []
    assert not Attempt.objects.filter(job_id__in=cancel_events, ended_at__isnull=True).exists()
    assert set(Job.objects.filter(pk__in=cancel_events).values_list("state", flat=True)) == {"cancelled"}


def test_two_hundred_concurrent_api_submissions_with_two_schedulers_never_over_admit(tenant, inventory, audit):
    """200 submissions through the API from 8 clients at once (two projects of one organization, sizes drawn at
    random) while two schedulers cycle: every admission is checked at its instant against the quota its cycle read
    and the nodes' sizes, every submission is stored once, and no job is admitted twice."""
    from tests.conftest import client_for
    from tests.jobs.conftest import api_body

    errors: list[BaseException] = []
    stop = threading.Event()
    statuses: list[int] = []  # list.append is atomic under the GIL; a Counter's += is not
    clients = {"vision": client_for(tenant.users["member"]), "speech": client_for(tenant.users["owner"])}

    def submitter(seed: int) -> None:
        local = random.Random(seed)
        try:
            for i in range(25):
                project = "vision" if local.random() < 0.6 else "speech"
                body = api_body(project=project, name=f"c{seed}-{i}", replicas=local.choice([1, 1, 2]),
                                devices=local.choice([2, 4, 8]))
                statuses.append(clients[project].post("/api/v1/jobs/", body, format="json").status_code)
        except BaseException as error:  # surfaced below
            errors.append(error)

    def scheduler() -> None:
        try:
            while not stop.is_set():
                run_once()
        except BaseException as error:
            errors.append(error)

    schedulers = [in_thread(scheduler) for _ in range(2)]
    submitters = [in_thread(submitter, seed) for seed in range(8)]
    for thread in submitters:
        thread.join(timeout=180)
    run_once()
    stop.set()
    for thread in schedulers:
        thread.join(timeout=60)
    assert errors == [] and Counter(statuses) == Counter({201: 200})
    assert Job.objects.count() == 200
    assert audit.violations == [] and len(audit.cycles) >= 1
    admissions = Counter(JobEvent.objects.filter(to_state="admitted").values_list("job_id", flat=True))
    assert admissions and max(admissions.values()) == 1, "a job was admitted twice"


def test_cancelling_a_job_the_cycle_admits_does_not_wait_for_the_forecast(tenant, inventory, monkeypatch):
    """The estimated starts (up to TIDAL_ETA_SECONDS of simulation) are computed before the cycle writes its
    admissions: a cancellation of a job being admitted waited for the whole forecast on the row lock of the
    admission. Now it goes through at once, and the admission then finds the job cancelled and skips it."""
    import jobs.loop

    admitted = submit(tenant, inventory["a100"], devices=8)
    submit(tenant, inventory["a100"], devices=8, name="waits")  # a waiting job, so there is something to forecast
    submit(tenant, inventory["a100"], devices=8, name="waits-too")
    forecasting, cancelled = threading.Event(), threading.Event()
    released_by_the_cancellation = []
    real = jobs.loop.core.estimate_starts

    def slow_forecast(*args, **kwargs):
        """Holds the forecast until the cancellation has committed (or 20 s, when the cancellation waits on it)."""
        forecasting.set()
        released_by_the_cancellation.append(cancelled.wait(20))
        return real(*args, **kwargs)

    monkeypatch.setattr(jobs.loop.core, "estimate_starts", slow_forecast)
    monkeypatch.setitem(jobs.loop.settings.TIDAL, "ETA_SECONDS", 5.0)
    cycle = in_thread(run_once)
    assert forecasting.wait(10)
    with transaction.atomic():
        job_cancel(actor=tenant.users["member"], job=Job.objects.get(pk=admitted.pk))
    cancelled.set()
    cycle.join(30)
    assert released_by_the_cancellation == [True], "the cancellation waited for the cycle's forecast"
    admitted.refresh_from_db()
    assert admitted.state == "cancelled" and not Attempt.objects.filter(job=admitted).exists()


def test_a_resize_races_itself_and_applies_once(tenant, inventory):
    """Threads applying grows read at the same version (the same decision twice, or two different ones from the same
    snapshot): exactly one wins; the attempt's placement and history say the same."""
    from django.utils import timezone

    from jobs import lifecycle
    from jobs.lifecycle import Admission, transition, transition_many
    from jobs.models import AttemptResize
    from jobs.services import job_submit
    from jobs.states import State
    from tests.jobs.conftest import spec

    body = spec(inventory["h100"], replicas=4)
    body["groups"][0]["min_replicas"] = 1
    job = job_submit(actor=tenant.users["member"], project=tenant.project, spec=body).job
    transition_many([Admission(job.pk, inventory["cluster"].pk,
                               [{"role": "worker", "index": 0, "node": "r1-n1", "devices": 8}])], now=timezone.now())
    job = Job.objects.get(pk=job.pk)
    if job.state == State.ADMITTED:  # the simulated backend's dispatch, after commit, may have claimed it
        job = transition(job, State.DISPATCHING, reason="test", actor="backend")
    job = transition(job, State.RUNNING, reason="test", actor="backend")
    barrier = threading.Barrier(6)
    results: list[object] = []

    def grow(index: int) -> None:
        barrier.wait()
        results.append(lifecycle.resize(job.pk, attempt_id=job.current_attempt_id, version=0, kind="grow",
                                        now=timezone.now(), reason="race", replicas=[
                                            {"role": "worker", "index": index, "node": "r1-n2", "devices": 8}]))

    threads = [in_thread(grow, index) for index in (1, 1, 1, 2, 2, 3)]
    for thread in threads:
        thread.join()
    assert sum(r is not None for r in results) == 1 and len(results) == 6
    attempt = Attempt.objects.get(pk=job.current_attempt_id)
    assert len(attempt.placement) == 2 and attempt.resize_count == 1 and AttemptResize.objects.count() == 1
