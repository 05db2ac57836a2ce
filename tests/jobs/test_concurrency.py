"""Concurrent submissions, cancellations and two scheduler loops on PostgreSQL never over-allocate a node, never
put a project above guarantee + borrow limit, and never admit a job twice."""

from __future__ import annotations

import contextlib
import random
import threading
from collections import Counter

import pytest
from django.db import connection, connections

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
