"""Every admitted job has one run, continued across its attempts, ended with the job; its process gets the run
and a token for it."""

from __future__ import annotations

import pytest

from jobs import ports
from jobs.lifecycle import AttemptEnd, transition
from jobs.models import Attempt
from jobs.selectors import RESUME_ENV_NAMES
from jobs.services import job_cancel
from jobs.states import State
from tests.jobs.conftest import admit, inventory, submit  # noqa: F401  (fixtures)
from tracking.env import RUN_ENV_NAMES
from tracking.models import Run
from tracking.tokens import RunTokenClaim, claim_of

pytestmark = pytest.mark.django_db


def test_a_queued_job_has_no_run_and_its_first_admission_creates_one(tenant, inventory):  # noqa: F811
    job = submit(tenant, inventory["h100"], experiment="llama sweep")
    assert not Run.objects.filter(job=job).exists()
    admit(job, inventory["cluster"], ["r1-n1"])
    run = Run.objects.get(job=job)
    assert (run.project, run.experiment.name, run.name, run.attempt, run.status) == (
        tenant.project, "llama sweep", job.name, 1, "RUNNING")
    assert run.user == tenant.users["member"] and run.tags["tidal.job"] == str(job.pk)


def test_a_requeued_job_continues_the_same_run_with_the_next_attempt(tenant, inventory):  # noqa: F811
    job = submit(tenant, inventory["h100"])
    admit(job, inventory["cluster"], ["r1-n1"])
    transition(job, State.PREEMPTED, reason="preempted for #9", actor="scheduler",
               end=AttemptEnd(reason="preempted"))
    job.refresh_from_db()
    transition(job, State.QUEUED, reason="requeued", actor="scheduler")
    job.refresh_from_db()
    admit(job, inventory["cluster"], ["r1-n2"])
    runs = list(Run.objects.filter(job=job))
    assert len(runs) == 1 and runs[0].attempt == 2 and runs[0].status == "RUNNING"


@pytest.mark.parametrize(("end", "status"), [("cancel", "KILLED"), ("fail", "FAILED"), ("succeed", "FINISHED")])
def test_a_job_that_ends_for_good_ends_its_run(tenant, inventory, end, status):  # noqa: F811
    job = submit(tenant, inventory["h100"])
    admit(job, inventory["cluster"], ["r1-n1"])
    if end == "cancel":
        job_cancel(actor=tenant.users["member"], job=job)
    else:
        target = State.FAILED if end == "fail" else State.SUCCEEDED
        transition(job, State.DISPATCHING, reason="dispatched", actor="backend")
        job.refresh_from_db()
        transition(job, target, reason=end, actor="backend", end=AttemptEnd(reason=end))
    run = Run.objects.get(job=job)
    assert run.status == status and run.ended_at is not None


def test_a_cancelled_queued_job_never_had_a_run(tenant, inventory):  # noqa: F811
    job = submit(tenant, inventory["h100"])
    job_cancel(actor=tenant.users["member"], job=job)
    assert not Run.objects.filter(job=job).exists()


def test_the_attempts_process_gets_its_run_and_a_token_for_it_only_as_secrets(tenant, inventory):  # noqa: F811
    job = submit(tenant, inventory["h100"])
    admit(job, inventory["cluster"], ["r1-n1"])
    run = Run.objects.get(job=job)
    env = ports.env_for(Attempt.objects.get(job=job))
    assert env.plain["TIDAL_RUN_ID"] == env.plain["MLFLOW_RUN_ID"] == str(run.pk)
    assert env.plain["MLFLOW_TRACKING_URI"].endswith(f"/mlflow/{tenant.project.slug}")
    assert claim_of(env.secret["TIDAL_RUN_TOKEN"]) == RunTokenClaim(run.pk, 1)
    assert not any(value.startswith("tdr_") for value in env.plain.values())
    # A job spec may set none of them: its own env comes last in a pod and would override them. Each env source
    # declares every name it sets (tracking the run's, jobs the checkpoint to resume from), whatever the clusters keep.
    assert all(ports.is_reserved_env(name) for name in [*env.plain, *env.secret])
    assert {*env.plain, *env.secret} == RUN_ENV_NAMES | RESUME_ENV_NAMES
