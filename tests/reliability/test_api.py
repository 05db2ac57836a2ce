"""Reliability's API and pages: tenancy of every endpoint (another organization's diagnosis is a 404), staff-only
patterns and quarantine controls, bad input a 400 naming the field."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Node
from jobs.lifecycle import AttemptEnd, transition
from jobs.states import State
from reliability.models import Diagnosis, FailurePattern
from reliability.services import node_quarantine
from tenancy.audit import AuditEntry
from tests.crosstenant import CrossTenantMixin
from tests.jobs.conftest import run, submit

NCCL = ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000) ran "
        "for 600031 milliseconds before timing out.")


def failed_attempt(tenant, inventory, project=None, lines=("Traceback (most recent call last):",
                                                          "ValueError: shapes do not match"), cause="user_error"):
    """A job of `project` whose first attempt failed with these log lines; returns its diagnosis."""
    if project is not None and project != tenant.project:
        from quotas.models import Quota
        Quota.objects.get_or_create(project=project, flavor=inventory["a100"], defaults={"guaranteed": 8})
    job = submit(tenant, inventory["a100"], devices=1, project=project,
                 user="outsider" if project == tenant.other_project else "member")
    job = run(job, inventory["cluster"], ["a-n1"], now=timezone.now() - timedelta(minutes=10))
    transition(job, State.FAILED, reason="failed", actor="backend",
               end=AttemptEnd(cause=cause, exit_code=1, logs={"worker-0": list(lines)}))
    return Diagnosis.objects.get(attempt__job=job)


class TestDiagnoses(CrossTenantMixin):
    basename = "diagnosis"
    writable = False
    detail_writes = ()

    @pytest.fixture(autouse=True)
    def _inventory(self, inventory):
        self.inventory = inventory

    def make_object(self, tenant, project):
        return failed_attempt(tenant, self.inventory, project)

    def test_filters_by_job_and_cause(self, tenant, clients):
        mine = failed_attempt(tenant, self.inventory)
        rows = clients["viewer"].get(f"{self.list_url()}?job={mine.job_id}&cause=user_error").json()["results"]
        assert [row["id"] for row in rows] == [mine.pk]
        assert rows[0]["attempt"] == 1 and rows[0]["action"] == "fix_code" and rows[0]["evidence"]
        assert clients["viewer"].get(f"{self.list_url()}?job={mine.job_id}&cause=nccl").json()["results"] == []

    def test_another_tenants_project_filter_is_a_400(self, tenant, clients):
        response = clients["viewer"].get(f"{self.list_url()}?project=secret")
        assert response.status_code == 400 and "project" in response.json()["error"]["fields"]


def test_the_diagnosis_of_an_attempt_by_its_id(tenant, inventory, clients):
    mine = failed_attempt(tenant, inventory, lines=(NCCL,), cause="nccl")
    theirs = failed_attempt(tenant, inventory, tenant.other_project)
    url = reverse("attempt-diagnosis", kwargs={"id": mine.attempt_id})
    body = clients["viewer"].get(url).json()
    assert (body["cause"], body["kind"], body["job"]) == ("nccl_timeout", "infra", mine.job_id)
    assert body["evidence"][0]["line"] == 1 and "Watchdog" in body["evidence"][0]["text"]
    outsider = clients["outsider"].get(url)
    assert outsider.status_code == 404 and outsider.json()["error"]["code"] == "not_found"
    assert clients["member"].get(reverse("attempt-diagnosis", kwargs={"id": theirs.attempt_id})).status_code == 404
    assert clients["member"].get(reverse("attempt-diagnosis", kwargs={"id": 999999})).status_code == 404


def test_the_report_counts_only_the_callers_failures(tenant, inventory, clients):
    failed_attempt(tenant, inventory, lines=(NCCL,))
    failed_attempt(tenant, inventory)
    failed_attempt(tenant, inventory, tenant.other_project)
    body = clients["viewer"].get(reverse("reliability-report")).json()
    assert body["failures"] == 2
    assert {row["cause"]: row["failures"] for row in body["by_class"]} == {"nccl_timeout": 1, "user_error": 1}
    assert [row["name"] for row in body["by_project"]] == ["vision"]
    assert body["by_node"][0]["name"] == "sim/a-n1" and body["by_node"][0]["failures"] == 2
    assert body["gpu_hours_lost"] == pytest.approx(2 * 1 * 600 / 3600, rel=0.01)
    assert [job["ratio"] for job in body["jobs"]] == [0.0, 0.0]  # each ran 10 min, all lost: no checkpoint
    other = clients["outsider"].get(reverse("reliability-report")).json()
    assert other["failures"] == 1 and other["by_project"][0]["name"] == "secret"


@pytest.mark.parametrize("query, field", [("since=yesterday", "since"), ("project=secret", "project"),
                                          ("since=2030-01-01T00:00:00Z&until=2029-01-01T00:00:00Z", "since"),
                                          ("bogus=1", "bogus")])
def test_bad_report_queries_are_400s_naming_the_field(tenant, clients, query, field):
    response = clients["viewer"].get(f"{reverse('reliability-report')}?{query}")
    assert response.status_code == 400 and field in response.json()["error"]["fields"], response.content


# ------------------------------------------------------------------------------------------- failure patterns

def test_staff_add_a_pattern_that_the_diagnosis_then_uses(tenant, inventory, staff_client, clients):
    response = staff_client.post(reverse("failurepattern-list"), {
        "pattern": r"ValueError: shapes do not match", "source": "log", "cause": "data_error", "confidence": 0.9,
        "action": "check_data", "description": "our loader's corrupted shards"}, format="json")
    assert response.status_code == 201, response.content
    assert AuditEntry.objects.filter(action="failure_pattern.create").exists()
    diagnosis = failed_attempt(tenant, inventory)
    assert diagnosis.cause == "data_error" and diagnosis.action == "check_data"
    assert any(item.get("rule") == f"pattern-{response.json()['id']}" for item in diagnosis.evidence)


@pytest.mark.parametrize("body, field", [
    ({"pattern": "(unclosed", "cause": "nccl"}, "pattern"),
    ({"pattern": ".*", "cause": "nccl"}, "pattern"),
    ({"pattern": "x", "cause": "gremlins"}, "cause"),
    ({"pattern": "x", "cause": "nccl", "source": "dmesg"}, "source"),
    ({"pattern": "x", "cause": "nccl", "confidence": 2}, "confidence"),
    ({"pattern": "x", "cause": "nccl", "confidence": "high"}, "confidence"),
    ({"pattern": "x", "cause": "nccl", "action": "pray"}, "action"),
    ({"cause": "nccl"}, "pattern"),
    ({"pattern": "x", "cause": "nccl", "colour": "red"}, "colour"),
])
def test_a_bad_pattern_is_a_400_naming_the_field_and_writes_nothing(staff_client, body, field):
    response = staff_client.post(reverse("failurepattern-list"), body, format="json")
    assert response.status_code == 400 and field in response.json()["error"]["fields"], response.content
    assert not FailurePattern.objects.exists()


def test_a_bad_regex_in_an_update_is_a_400(staff_client):
    pattern = FailurePattern.objects.create(pattern="ok", cause="nccl")
    url = reverse("failurepattern-detail", kwargs={"pk": pattern.pk})
    response = staff_client.patch(url, {"pattern": "[a-"}, format="json")
    assert response.status_code == 400 and "pattern" in response.json()["error"]["fields"]
    assert FailurePattern.objects.get(pk=pattern.pk).pattern == "ok"


def test_patterns_are_staff_only(tenant, clients):
    pattern = FailurePattern.objects.create(pattern="ok", cause="nccl")
    for role in ("owner", "outsider"):
        assert clients[role].get(reverse("failurepattern-list")).json()["results"] == []
        assert clients[role].get(reverse("failurepattern-detail", kwargs={"pk": pattern.pk})).status_code == 404
        assert clients[role].post(reverse("failurepattern-list"), {"pattern": "y", "cause": "nccl"},
                                  format="json").status_code == 403


def test_the_admin_console_refuses_a_bad_regex_on_its_field(db):
    from tests.conftest import make_user
    admin = make_user("root", is_staff=True, is_superuser=True)
    browser = Client()
    browser.force_login(admin)
    response = browser.post(reverse("admin:reliability_failurepattern_add"), {
        "pattern": "(oops", "source": "log", "cause": "nccl", "confidence": "0.8", "action": "", "quarantine": "",
        "description": "", "enabled": "on"})
    assert response.status_code == 200 and "Not a valid regular expression" in response.content.decode()
    assert "pattern" in response.context["adminform"].form.errors
    assert not FailurePattern.objects.exists()


# ------------------------------------------------------------------------------------------------- quarantine

def test_staff_quarantine_and_release_a_node_through_the_api(tenant, inventory, staff_client, clients):
    node = Node.objects.get(name="a-n1")
    url = reverse("quarantine-quarantine", kwargs={"pk": node.pk})
    assert clients["owner"].post(url, {"reason": "bad"}, format="json").status_code == 403
    refused = staff_client.post(url, {}, format="json")
    assert refused.status_code == 400 and "reason" in refused.json()["error"]["fields"]
    assert staff_client.post(url, {"reason": "ECC errors in dmesg"}, format="json").status_code == 200
    listed = clients["viewer"].get(reverse("quarantine-list")).json()["results"]
    assert [(row["name"], row["quarantine_reason"]) for row in listed] == [("a-n1", "ECC errors in dmesg")]
    release = reverse("quarantine-release", kwargs={"pk": node.pk})
    assert clients["owner"].post(release, {}, format="json").status_code == 403
    assert staff_client.post(release, {"note": "GPU reseated"}, format="json").status_code == 200
    assert Node.objects.get(pk=node.pk).quarantined_at is None
    again = staff_client.post(release, {}, format="json")
    assert again.status_code == 409 and "not quarantined" in again.json()["error"]["message"]
    assert AuditEntry.objects.filter(action="node.release").count() == 1
    assert staff_client.post(reverse("quarantine-release", kwargs={"pk": 99999}), {}).status_code == 404


# ------------------------------------------------------------------------------------------------------ pages

def test_the_job_page_shows_the_diagnosis_to_members_only(tenant, inventory):
    diagnosis = failed_attempt(tenant, inventory, lines=(NCCL,))
    member, outsider = Client(), Client()
    member.force_login(tenant.users["viewer"])
    outsider.force_login(tenant.users["outsider"])
    page = member.get(reverse("job_detail", kwargs={"pk": diagnosis.job_id})).content.decode()
    assert 'id="diagnoses"' in page and "nccl_timeout" in page and "Watchdog caught" in page
    assert outsider.get(reverse("job_detail", kwargs={"pk": diagnosis.job_id})).status_code == 404


def test_the_reliability_page_shows_only_the_callers_failures(tenant, inventory):
    mine = failed_attempt(tenant, inventory, lines=(NCCL,))
    theirs = failed_attempt(tenant, inventory, tenant.other_project, lines=("OSError: [Errno 5] Input/output error",))
    member, outsider = Client(), Client()
    member.force_login(tenant.users["viewer"])
    outsider.force_login(tenant.users["outsider"])
    page = member.get(reverse("reliability")).content.decode()
    assert "nccl_timeout" in page and f"#{mine.job_id}" in page and "data_error" not in page
    other = outsider.get(reverse("reliability")).content.decode()
    assert "data_error" in other and f"#{theirs.job_id}<" not in page and "nccl_timeout" not in other
    assert member.get(reverse("reliability") + "?project=secret").status_code == 404


def test_the_quarantine_page_is_staff_only_and_releases(tenant, inventory, django_user_model):
    node = Node.objects.get(name="a-n2")
    node_quarantine(node, reason="Xid 48 on GPU 1", actor="test")
    member = Client()
    member.force_login(tenant.users["owner"])
    assert member.get(reverse("reliability-quarantine")).status_code == 403
    assert member.post(reverse("reliability-release", kwargs={"pk": node.pk})).status_code == 403
    clusters_page = member.get(reverse("clusters")).content.decode()
    assert "quarantined" in clusters_page and "Xid 48 on GPU 1" in clusters_page
    staff = Client()
    staff.force_login(django_user_model.objects.create_user("ops", is_staff=True))
    assert "Xid 48 on GPU 1" in staff.get(reverse("reliability-quarantine")).content.decode()
    assert staff.post(reverse("reliability-release", kwargs={"pk": node.pk})).status_code == 302
    assert Node.objects.get(pk=node.pk).quarantined_at is None


def test_recovery_time_lost_work_and_effective_training_time(tenant, prices, clients):
    """Failed 600 s into its attempt, 300 s after its last checkpoint; running again 120 s later."""
    from jobs.lifecycle import Admission, record_checkpoint, transition_many

    inventory = prices  # the a100 at 1.00 a device-hour
    t0 = timezone.now() - timedelta(seconds=1000)
    job = run(submit(tenant, inventory["a100"], devices=2, retry_limit=1), inventory["cluster"], ["a-n1"], now=t0)
    record_checkpoint(job.current_attempt, "s3://ckpt/300", now=t0 + timedelta(seconds=300), step=300)
    transition(job, State.RETRYING, reason="nccl", actor="backend", now=t0 + timedelta(seconds=600),
               end=AttemptEnd(cause="nccl_timeout", exit_code=1, logs={"worker-0": [NCCL]}))
    transition(job, State.QUEUED, reason="retry", actor="scheduler", now=t0 + timedelta(seconds=600))
    transition_many([Admission(job.pk, inventory["cluster"].pk, [{"role": "worker", "index": 0, "node": "a-n2",
                                                                   "devices": 2}])], now=t0 + timedelta(seconds=700))
    job.refresh_from_db()
    if job.state == State.ADMITTED:
        transition(job, State.DISPATCHING, reason="test", actor="system", now=t0 + timedelta(seconds=700))
    transition(job, State.RUNNING, reason="test", actor="system", now=t0 + timedelta(seconds=720))
    diagnosis = Diagnosis.objects.get(attempt__job=job)
    assert (diagnosis.ran_seconds, diagnosis.lost_seconds, diagnosis.devices) == (600.0, 300.0, 2)
    body = clients["viewer"].get(reverse("reliability-report")).json()
    assert (body["recoveries"], body["mttr_seconds"]) == (1, 120.0)
    assert body["gpu_hours_lost"] == pytest.approx(2 * 300 / 3600, abs=0.001)  # rounded to 3 places
    assert body["money_lost"] == pytest.approx(2 * 300 / 3600 * 1.00, abs=0.01)
    [row] = body["jobs"]
    # wall ~1000 s from the first start; ran 600 + ~280 s; lost 300 s
    assert row["attempts"] == 2 and row["ratio"] == pytest.approx(580 / 1000, abs=0.02)


def test_the_cost_report_shows_what_failures_lost_to_the_callers_projects_only(tenant, prices):
    """One a100 device for 600 s since its start (no checkpoint): 1/6 GPU-hour, 0.17 at 1.00 a device-hour; the
    other organization's failure is not counted."""
    failed_attempt(tenant, prices)
    failed_attempt(tenant, prices, tenant.other_project)
    member = Client()
    member.force_login(tenant.users["viewer"])
    page = member.get(reverse("costs")).content.decode()
    assert 'id="lost-to-failures"' in page
    assert '<dd id="lost-failures">1</dd>' in page and '<dd id="lost-gpu-hours">0.2</dd>' in page
    assert '<dd id="lost-money">0.17 USD</dd>' in page
    table = page[page.index('id="lost-by-project"'):].split("</table>")[0]
    assert "<td>vision</td>" in table and "<td>secret</td>" not in table and "0.17 USD" in table
    other = member.get(reverse("costs") + "?project=vision").content.decode()
    assert '<dd id="lost-failures">1</dd>' in other


def test_the_report_gives_what_each_projects_failures_lost(tenant, prices, clients):
    """Two failures of vision (600 s of one a100 each) and one of secret, which vision's members never see."""
    failed_attempt(tenant, prices)
    failed_attempt(tenant, prices)
    failed_attempt(tenant, prices, tenant.other_project)
    [row] = clients["viewer"].get(reverse("reliability-report")).json()["by_project"]
    assert (row["name"], row["failures"]) == ("vision", 2)
    assert row["gpu_hours_lost"] == pytest.approx(2 * 600 / 3600, abs=0.002)
    assert row["money_lost"] == pytest.approx(2 * 600 / 3600 * 1.00, abs=0.01)
    [theirs] = clients["outsider"].get(reverse("reliability-report")).json()["by_project"]
    assert theirs["name"] == "secret" and theirs["gpu_hours_lost"] == pytest.approx(600 / 3600, abs=0.002)


class TestProjectPolicies(CrossTenantMixin):
    basename = "reliabilitypolicy"

    def make_object(self, tenant, project):
        from reliability.models import ProjectPolicy
        return ProjectPolicy.objects.create(project=project)

    def create_payload(self, tenant, project):
        return {"project": project.slug, "restart_on_hang": True}

    def update_payload(self, tenant, obj):
        return {"restart_on_hang": True}

    def test_an_admin_opts_in_once_per_project(self, tenant, clients):
        created = clients["admin"].post(self.list_url(), self.create_payload(tenant, tenant.project), format="json")
        assert created.status_code == 201 and created.json()["restart_on_hang"] is True
        again = clients["admin"].post(self.list_url(), self.create_payload(tenant, tenant.project), format="json")
        assert again.status_code == 400 and "project" in again.json()["error"]["fields"]
        assert clients["member"].post(self.list_url(), {"project": "vision", "restart_on_hang": False},
                                      format="json").status_code == 403
        assert AuditEntry.objects.filter(action="projectpolicy.create").count() == 1


def test_the_cost_report_api_gives_what_failures_lost_to_the_callers_projects_only(tenant, prices, clients):
    """The API answer of the cost report carries the page's "lost to failures" (one failure of vision, 600 s of one
    a100 at 1.00 a device-hour); the other organization's failure is not counted, and a filter by project narrows
    it."""
    failed_attempt(tenant, prices)
    failed_attempt(tenant, prices, tenant.other_project)
    url = reverse("cost-report") + "?month=" + timezone.now().strftime("%Y-%m")
    lost = clients["viewer"].get(url).json()["figures"]["lost_to_failures"]
    assert lost["failures"] == 1 and lost["gpu_hours"] == pytest.approx(600 / 3600, abs=0.002)
    assert lost["money"] == pytest.approx(0.17, abs=0.01)
    assert [row["project"] for row in lost["by_project"]] == ["vision"]
    theirs = clients["outsider"].get(url).json()["figures"]["lost_to_failures"]
    assert [row["project"] for row in theirs["by_project"]] == ["secret"]
    narrowed = clients["viewer"].get(url + "&project=vision").json()["figures"]["lost_to_failures"]
    assert narrowed["failures"] == 1
