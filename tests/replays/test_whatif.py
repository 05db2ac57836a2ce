"""The admin what-if page: replay real history as configured and with a proposed change, show the per-project
difference, and save the change (audited) only when the admin presses "Apply this change"."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from quotas.models import PriorityClass, Quota
from replays.models import ReplayRun
from tenancy.models import AuditEntry
from tests.conftest import make_user

FORM = reverse("admin:replays_whatif")


@pytest.fixture
def admin_client(db) -> Client:
    client = Client()
    client.force_login(make_user("root", is_staff=True, is_superuser=True))
    return client


def start(client, capture, **change) -> ReplayRun:
    data = {"days": 7, "kind": "quota", **change}
    with capture(execute=True):
        response = client.post(FORM, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    run = ReplayRun.objects.get()
    assert response["Location"] == reverse("admin:replays_whatif_result", args=[run.pk])
    return run


def test_the_admin_index_and_replay_list_link_to_the_page(admin_client):
    index = admin_client.get(reverse("admin:index")).content.decode()
    assert "What-if analyses" in index
    whatif_list = admin_client.get(reverse("admin:replays_whatif_changelist"))
    assert whatif_list.status_code == 302 and whatif_list["Location"] == FORM
    assert FORM in admin_client.get(reverse("admin:replays_replayrun_changelist")).content.decode()
    form = admin_client.get(FORM)
    assert form.status_code == 200 and "Replay current vs proposed" in form.content.decode()


def test_quota_what_if_shows_the_difference_and_saves_only_on_apply(
        history, tenant, inventory, admin_client, django_capture_on_commit_callbacks):
    run = start(admin_client, django_capture_on_commit_callbacks, project="vision", flavor="nvidia-h100-80gb",
                quota_field="guaranteed", quota_value=32)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    assert run.kind == "whatif" and run.jobs == 16 and run.policy == "current"
    assert [s["name"] for s in run.summary] == ["current", "proposed"]
    page = admin_client.get(reverse("admin:replays_whatif_result", args=[run.pk])).content.decode()
    assert "Proposed: vision guarantee of nvidia-h100-80gb: 16 -&gt; 32" in page
    assert 'id="difference"' in page and ">vision<" in page and ">speech<" in page and ">ALL<" in page
    assert "24 &rarr; 40" in page  # vision's guarantee (16 H100 + 8 A100), current -> proposed
    assert any(verdict in page for verdict in ('class="gains"', 'class="loses"', 'class="same"'))
    assert "Apply this change" in page
    quota = Quota.objects.get(project=tenant.project, flavor=inventory["h100"])
    assert quota.guaranteed == 16  # viewing saved nothing
    assert not AuditEntry.objects.filter(action__startswith="quota.").exists()

    response = admin_client.post(reverse("admin:replays_whatif_apply", args=[run.pk]), follow=True)
    assert "Saved vision guarantee of nvidia-h100-80gb: 16 -&gt; 32." in response.content.decode()
    quota.refresh_from_db()
    assert quota.guaranteed == 32
    entry = AuditEntry.objects.get(action="quota.change")
    assert entry.actor_name == "root" and entry.changes == {"guaranteed": [16, 32]}
    assert entry.project == tenant.project
    run.refresh_from_db()
    assert run.applied_at is not None and run.applied_by_name == "root"
    again = admin_client.post(reverse("admin:replays_whatif_apply", args=[run.pk]), follow=True)
    assert "already applied" in again.content.decode()
    assert AuditEntry.objects.filter(action="quota.change").count() == 1


def test_a_stale_what_if_is_not_applied(history, tenant, inventory, admin_client,
                                        django_capture_on_commit_callbacks):
    run = start(admin_client, django_capture_on_commit_callbacks, project="speech", flavor="nvidia-h100-80gb",
                quota_field="borrow_limit", quota_value=0)
    Quota.objects.filter(project=inventory["speech"], flavor=inventory["h100"]).update(borrow_limit=4)
    response = admin_client.post(reverse("admin:replays_whatif_apply", args=[run.pk]), follow=True)
    assert "changed since this what-if ran" in response.content.decode()
    assert Quota.objects.get(project=inventory["speech"], flavor=inventory["h100"]).borrow_limit == 4


def test_priority_class_what_if_is_applied_with_an_audit_entry(history, admin_client,
                                                               django_capture_on_commit_callbacks):
    run = start(admin_client, django_capture_on_commit_callbacks, kind="priority", priority_name="low",
                priority_value=150)
    admin_client.post(reverse("admin:replays_whatif_apply", args=[run.pk]))
    assert PriorityClass.objects.get(name="low").value == 150
    assert AuditEntry.objects.get(action="priorityclass.change").changes == {"value": [100, 150]}


def test_policy_what_if_names_the_setting_and_saves_nothing(history, admin_client,
                                                            django_capture_on_commit_callbacks):
    run = start(admin_client, django_capture_on_commit_callbacks, kind="policy", policy_field="blocking",
                policy_value="strict")
    page = admin_client.get(reverse("admin:replays_whatif_result", args=[run.pk])).content.decode()
    assert "scheduling policy blocking: backfill -&gt; strict" in page
    assert "TIDAL_POLICY_BLOCKING=strict" in page and "Apply this change" not in page
    assert not AuditEntry.objects.exists()


def test_bad_changes_are_form_errors(history, admin_client):
    page = admin_client.post(FORM, {"days": 7, "kind": "quota", "project": "vision", "flavor": "nvidia-h100-80gb",
                                    "quota_field": "guaranteed"}).content.decode()
    assert "A quota is a whole number of devices" in page
    page = admin_client.post(FORM, {"days": 7, "kind": "policy", "policy_field": "preemption",
                                    "policy_value": "strict"}).content.decode()
    assert "preemption is one of True, False" in page
    assert ReplayRun.objects.count() == 0


def test_an_empty_history_is_a_form_error(inventory, admin_client):
    page = admin_client.post(FORM, {"days": 1, "kind": "quota", "project": "vision", "flavor": "nvidia-h100-80gb",
                                    "quota_field": "guaranteed", "quota_value": 8}).content.decode()
    assert "No finished jobs in the last 1 days" in page


def test_progress_is_shown_while_running(history, admin_client, monkeypatch):
    from replays import services

    monkeypatch.setattr("replays.tasks.replay_task.delay", lambda run_id: None)  # a worker would pick it up
    run = services.whatif_create(actor=None, days=7, change=services.whatif_change(
        kind="quota", project="vision", flavor="nvidia-h100-80gb", field="guaranteed", value=8))
    ReplayRun.objects.filter(pk=run.pk).update(status="running", progress=0.42, eta_seconds=12)
    page = admin_client.get(reverse("admin:replays_whatif_result", args=[run.pk])).content.decode()
    assert 'http-equiv="refresh"' in page and 'value="42"' in page and "about 12 s left" in page
    assert "Apply this change" not in page


def test_non_staff_get_the_admin_login(tenant, inventory):
    client = Client()
    client.force_login(tenant.users["owner"])
    for url in (FORM, reverse("admin:replays_whatif_result", args=[1]), reverse("admin:replays_whatif_apply",
                                                                                 args=[1])):
        response = client.post(url) if url.endswith("apply/") else client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
