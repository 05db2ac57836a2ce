"""POST /api/v1/replays/ as platform staff: create, progress, results and report; bad input is a 400 naming the
field (with the line for a bad CSV), never a 500; non-staff get 403 and only ever see their own runs."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from replays import runs
from replays.models import ReplayRun
from tests.conftest import client_for, make_user
from tests.crosstenant import CrossTenantMixin
from tests.replays.conftest import trace_text

URL = "/api/v1/replays/"


def upload(text: str, name: str = "trace.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/csv")


def post(client, capture, data, fmt="multipart"):
    with capture(execute=True):
        return client.post(URL, data, format=fmt)


def test_staff_creates_a_replay_and_reads_progress_results_and_report(
        inventory, staff_client, django_capture_on_commit_callbacks):
    response = post(staff_client, django_capture_on_commit_callbacks, {
        "trace": upload(trace_text()), "cluster": "current", "quotas": "current", "policy": "production",
        "compare": ["strict-fifo", "pooled-fifo"]})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["jobs"] == 12 and body["trace_name"] == "trace.csv" and body["cluster_source"] == "current"
    detail = staff_client.get(f"{URL}{body['id']}/").json()
    assert detail["status"] == "succeeded", detail["message"]
    assert detail["progress"] == 1.0 and detail["eta_seconds"] == 0.0
    assert [s["name"] for s in detail["summary"]] == ["production", "strict-fifo", "pooled-fifo"]
    assert detail["summary"][0]["overall"]["jobs"] == 12
    assert set(detail["summary"][0]["projects"]) == {"vision", "speech"}
    assert [(c["a"], c["b"]) for c in detail["comparison"]] == [("production", "strict-fifo"),
                                                                 ("production", "pooled-fifo")]
    assert "report.html" in detail["files"] and "summary.csv" in detail["files"]
    assert detail["report_url"].endswith(f"/api/v1/replays/{body['id']}/report/")
    report = staff_client.get(f"{URL}{body['id']}/report/", HTTP_ACCEPT="text/html")
    assert report.status_code == 200 and report["Content-Type"].startswith("text/html")
    html = b"".join(report.streaming_content).decode()
    assert "Trace replay: production, strict-fifo, pooled-fifo" in html and "data:image/png;base64," in html


def test_replay_of_the_platforms_history(history, staff_client, django_capture_on_commit_callbacks):
    response = post(staff_client, django_capture_on_commit_callbacks,
                    {"source": "history", "days": 7, "policy": "current", "compare": ["fifo-skip"]}, fmt="json")
    assert response.status_code == 201, response.content
    run = staff_client.get(f"{URL}{response.json()['id']}/").json()
    assert run["status"] == "succeeded", run["message"]
    assert run["trace_source"] == "history" and run["days"] == 7 and run["jobs"] == 16
    assert [s["name"] for s in run["summary"]] == ["current", "fifo-skip"]
    assert run["history"] == {"exported": 16, "not_run": 1}  # finished jobs only, the cancelled one left out
    vision = run["summary"][0]["by_flavor"]["projects"]["vision"]
    assert vision["nvidia-h100-80gb"]["guarantee"] == 16 and vision["nvidia-a100-40gb"]["guarantee"] == 8
    assert run["comparison"][0]["by_flavor"]["flavors"]["nvidia-h100-80gb"]["devices"] == 32


def test_uploaded_cluster_and_quota_files(db, staff_client, django_capture_on_commit_callbacks):
    response = post(staff_client, django_capture_on_commit_callbacks, {
        "trace": upload(trace_text(flavor="gpu")),
        "cluster": upload("nodes:\n  - {flavor: gpu, devices: 8, count: 2}\n", "c.yaml"),
        "quotas": upload("project,flavor,guaranteed,borrow_limit\nvision,gpu,8,8\nspeech,gpu,8,8\n", "q.csv"),
        "policy": "fifo-skip", "skip_invalid": "true"})
    assert response.status_code == 201, response.content
    run = ReplayRun.objects.get(pk=response.json()["id"])
    assert run.status == "succeeded" and run.cluster_source == "upload" and run.quotas_source == "upload"
    assert run.summary[0]["projects"]["vision"]["guarantee"] == 8


def _error(response, field):
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert field in error["fields"], error
    return error["message"]


def test_bad_csv_is_a_400_with_the_line(inventory, staff_client, django_capture_on_commit_callbacks):
    bad = trace_text(n=3, extra="x,0,-5,8,1,nvidia-h100-80gb,vision,normal,,\n")
    message = _error(post(staff_client, django_capture_on_commit_callbacks, {"trace": upload(bad, "week.csv")}),
                     "trace")
    assert message == "week.csv line 5: negative duration_s -5 [negative_duration]"
    malformed = trace_text(n=1) + "y,1,2,3\n"
    message = _error(post(staff_client, django_capture_on_commit_callbacks, {"trace": upload(malformed)}), "trace")
    assert "line 3" in message and "[malformed]" in message
    unknown = trace_text(n=1, flavor="tpu-v5")
    assert "line 2: unknown flavor 'tpu-v5'" in _error(
        post(staff_client, django_capture_on_commit_callbacks, {"trace": upload(unknown)}), "trace")
    assert "not UTF-8" in _error(post(staff_client, django_capture_on_commit_callbacks,
                                      {"trace": SimpleUploadedFile("x.csv", b"\xff\xfe\x00bad")}), "trace")
    assert ReplayRun.objects.count() == 0  # nothing half-created


def test_other_bad_input_names_the_field(inventory, staff_client, django_capture_on_commit_callbacks):
    def bad(data, field, fmt="multipart"):
        return _error(post(staff_client, django_capture_on_commit_callbacks, data, fmt), field)

    assert "unknown policy 'lottery'" in bad({"trace": upload(trace_text()), "policy": "lottery"}, "policy")
    assert "unknown policy 'nope'" in bad({"trace": upload(trace_text()), "compare": ["sjf", "nope"]}, "compare")
    assert bad({"policy": "production"}, "trace")
    assert bad({"source": "history"}, "days", fmt="json")
    assert "No finished jobs" in bad({"source": "history", "days": 3}, "days", fmt="json")
    assert bad({"trace": upload(trace_text()), "cluster": "somewhere"}, "cluster")
    assert "devices" in bad({"trace": upload(trace_text()), "cluster": upload("flavor,devices\ngpu,x\n", "c.csv")},
                            "cluster")
    assert bad({"trace": upload(trace_text()), "quotas": upload("project,flavor,guaranteed\nv,gpu,-1\n")}, "quotas")
    assert bad({"trace": upload(trace_text()), "colour": "red"}, "colour")
    assert ReplayRun.objects.count() == 0


def test_a_failing_replay_ends_failed_with_a_message(inventory, staff_client, django_capture_on_commit_callbacks,
                                                    monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("core exploded")

    monkeypatch.setattr(runs, "run", explode)
    response = post(staff_client, django_capture_on_commit_callbacks, {"trace": upload(trace_text())})
    assert response.status_code == 201
    run = staff_client.get(f"{URL}{response.json()['id']}/").json()
    assert run["status"] == "failed" and run["message"] == "RuntimeError: core exploded"
    assert staff_client.get(f"{URL}{run['id']}/report/").status_code == 404
    # Found by the API fuzz test: asked for HTML, the refusal came as text/html; it is the API's JSON error.
    for asked in ({"HTTP_ACCEPT": "text/html"}, {"data": {"format": "html"}}):
        missing = staff_client.get(f"{URL}{run['id']}/report/", **asked)
        assert missing.status_code == 404 and missing["Content-Type"] == "application/json"
        assert missing.json()["error"]["code"] == "not_found"


def test_progress_and_eta_are_written_while_running(inventory, staff_client, monkeypatch):
    seen = []
    real_run = runs.run

    def observed(trace, cluster, quotas, policy, *, progress, **kwargs):
        def spy(done, total, now):
            progress(done, total, now)
            row = ReplayRun.objects.get()
            seen.append((row.status, row.progress, row.eta_seconds))

        return real_run(trace, cluster, quotas, policy, progress=spy, **kwargs)

    monkeypatch.setattr(runs, "run", observed)
    monkeypatch.setattr(runs, "PROGRESS_INTERVAL", 0.0)
    response = staff_client.post(URL, {"trace": upload(trace_text()), "compare": ["fifo-skip"]})  # not run yet
    assert ReplayRun.objects.get(pk=response.json()["id"]).status == "queued"
    runs.replay_execute(response.json()["id"])
    assert all(status == "running" for status, *_ in seen)
    fractions = [p for _, p, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] < 0.5 and fractions[-1] == 1.0
    assert any(0.5 <= p < 1.0 for p in fractions)  # the second policy continues where the first ended
    assert all(eta is not None and eta >= 0 for _, p, eta in seen if p > 0)


def test_a_replay_with_elastic_jobs_and_a_share_outside_0_to_1(inventory, staff_client,
                                                               django_capture_on_commit_callbacks):
    for share, reason in (("1.5", "less than or equal to 1"), ("-0.1", "greater than or equal to 0")):
        assert reason in _error(post(staff_client, django_capture_on_commit_callbacks, {
            "trace": upload(trace_text()), "elastic": share}), "elastic")
    assert _error(post(staff_client, django_capture_on_commit_callbacks,
                       {"trace": upload(trace_text()), "elastic_max_factor": "0.5"}), "elastic_max_factor")
    assert ReplayRun.objects.count() == 0
    response = post(staff_client, django_capture_on_commit_callbacks, {
        "trace": upload(trace_text()), "elastic": "1", "compare": ["production"]})
    assert response.status_code == 201, response.content
    run = staff_client.get(f"{URL}{response.json()['id']}/").json()
    assert run["status"] == "succeeded", run["message"]
    overall = run["summary"][0]["overall"]
    assert overall["elastic_jobs"] == 12  # every job of 4 or 8 devices, all chosen at a share of 1
    assert run["summary"][0]["options"]["elastic_fraction"] == 1.0


def test_non_staff_cannot_create(tenant, clients):
    for role in ("owner", "member", "outsider"):
        response = clients[role].post(URL, {"trace": upload(trace_text())}, format="multipart")
        assert response.status_code == 403, role
        assert response.json()["error"]["code"] == "permission_denied"
    assert ReplayRun.objects.count() == 0


def test_staff_see_every_run_others_only_their_own(tenant, clients, staff_client):
    theirs = ReplayRun.objects.create(created_by=tenant.users["owner"], created_by_name="owner", status="succeeded")
    other = ReplayRun.objects.create(created_by=make_user("someone-else", is_staff=True), created_by_name="x")
    staff_ids = {row["id"] for row in staff_client.get(URL).json()["results"]}
    assert {theirs.pk, other.pk} <= staff_ids
    assert {row["id"] for row in clients["owner"].get(URL).json()["results"]} == {theirs.pk}
    assert clients["owner"].get(f"{URL}{other.pk}/").status_code == 404
    assert clients["owner"].get(f"{URL}{other.pk}/report/").status_code == 404
    assert client_for(make_user("nobody")).get(f"{URL}{theirs.pk}/report/").status_code == 404


class TestReplayCrossTenant(CrossTenantMixin):
    """Runs belong to their creator: another user answers 404 and never sees them in the list."""

    basename = "replay"
    user_owned = True
    writable = False
    detail_writes = ()

    def make_object(self, tenant, user):
        return ReplayRun.objects.create(created_by=user, created_by_name=user.username, status="succeeded")


def test_routes_are_registered():
    assert reverse("replay-list") == URL and reverse("replay-report", kwargs={"pk": 3}) == f"{URL}3/report/"
