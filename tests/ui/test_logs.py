"""The log panel of the job page: a replica's tail, follow by polling, another tenant's job is 404."""

from jobs.loop import run_once


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
