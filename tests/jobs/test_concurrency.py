"""Concurrent submissions, cancellations and two scheduler loops on PostgreSQL never over-allocate a node, never
put a project above guarantee + borrow limit, and never admit a job twice."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter

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
