"""The log panel of the job page: a replica's tail of an attempt, following it by polling until the job ends,
another tenant's job is 404."""

from jobs.loop import run_once
from jobs.states import State


def test_log_panel_shows_the_replica_and_follows_while_running(tenant, ui, submit, django_capture_on_commit_callbacks):
    job = submit(tenant.users["member"], tenant.project)
    with django_capture_on_commit_callbacks(execute=True):
        run_once()
    page = ui["viewer"].get(f"/jobs/{job.pk}/").content.decode()
    assert f"/jobs/{job.pk}/logs/" in page
    panel = ui["viewer"].get(f"/jobs/{job.pk}/logs/?replica=worker-0&follow=1").content.decode()
    assert "worker-0" in panel and "[simulated]" in panel
    assert 'hx-trigger="every' in panel  # follow: the fragment polls itself


def test_unknown_replica_is_explained_not_a_500(tenant, ui, submit):
    job = submit(tenant.users["member"], tenant.project)
    response = ui["member"].get(f"/jobs/{job.pk}/logs/?replica=worker-9")
    assert response.status_code == 200 and "Unknown replica" in response.content.decode()


def test_another_tenants_job_logs_are_404(tenant, ui, submit):
    job = submit(tenant.users["member"], tenant.project)
    assert ui["outsider"].get(f"/jobs/{job.pk}/logs/").status_code == 404


def test_the_panel_follows_the_attempt_from_queued_to_running_to_ended(tenant, infra, ui, submit):
    """Opened on a queued job, the panel keeps refreshing: it says there is no attempt yet, then shows the running
    attempt's live lines, then what the ended attempt kept, and stops refreshing once the job finished."""
    from jobs.lifecycle import AttemptEnd, transition
    from tests.jobs.conftest import run

    job = submit(tenant.users["member"], tenant.project)
    page = ui["member"].get(f"/jobs/{job.pk}/").content.decode()
    assert "no log yet: the job has not started an attempt" in page
    assert 'id="log-panel" hx-get=' in page and 'hx-trigger="every' in page.split('id="log-panel"')[1][:400]
    run(job, infra["cluster"], ["node-1"])
    live = ui["member"].get(f"/jobs/{job.pk}/logs/").content.decode()
    assert "live (simulated cluster)" in live and "is running." in live and 'hx-trigger="every' in live
    transition(job, State.SUCCEEDED, reason="done", actor="backend", end=AttemptEnd(logs={"worker-0": ["loss 0.1"]}))
    ended = ui["member"].get(f"/jobs/{job.pk}/logs/").content.decode()
    assert "kept when the attempt ended" in ended and "loss 0.1" in ended
    assert "hx-trigger" not in ended  # finished: nothing more will come


def test_an_earlier_attempt_can_be_chosen(tenant, infra, ui, submit):
    from jobs.lifecycle import AttemptEnd, transition
    from tests.jobs.conftest import run

    job = run(submit(tenant.users["member"], tenant.project, retry_limit=1), infra["cluster"], ["node-1"])
    transition(job, State.RETRYING, reason="oom", actor="backend",
               end=AttemptEnd(cause="host_oom", logs={"worker-0": ["Killed"]}))
    transition(job, State.QUEUED, reason="retry", actor="system")
    run(job, infra["cluster"], ["node-2"])
    first = ui["member"].get(f"/jobs/{job.pk}/logs/?attempt=1").content.decode()
    assert "Attempt 1" in first and "Killed" in first and "hx-trigger" not in first
    current = ui["member"].get(f"/jobs/{job.pk}/logs/").content.decode()
    assert "Attempt 2" in current and "live (simulated cluster)" in current
    page = ui["member"].get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="attempt-1"' in page and "host_oom" in page and 'id="attempt-2"' in page
