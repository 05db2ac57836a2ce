"""The admin what-if page: replay real history as configured and with a proposed change, show the per-project
difference, and save the change (audited) only when the admin presses "Apply this change"."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from quotas.models import PriorityClass, Quota
from replays.models import ReplayRun
from tenancy.models import AuditEntry
from tests.conftest import make_user
from tests.replays.conftest import make_active_job

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
                quota_field="guaranteed", quota_value=8)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    assert run.kind == "whatif" and run.jobs == 16 and run.policy == "current"
    assert run.history["finished"] == 16 and run.history["not_run"] == 1  # the job cancelled in the queue
    assert [s["name"] for s in run.summary] == ["current", "proposed"]
    page = admin_client.get(reverse("admin:replays_whatif_result", args=[run.pk])).content.decode()
    assert "Proposed: vision guarantee of nvidia-h100-80gb: 16 -&gt; 8" in page
    assert 'id="difference"' in page and ">vision<" in page and ">speech<" in page and ">ALL<" in page
    assert "16 finished, 0 running now, 0 waiting now" in page
    assert any(verdict in page for verdict in ('class="gains"', 'class="loses"', 'class="same"'))
    assert "Apply this change" in page
    quota = Quota.objects.get(project=tenant.project, flavor=inventory["h100"])
    assert quota.guaranteed == 16  # viewing saved nothing
    assert not AuditEntry.objects.filter(action__startswith="quota.").exists()

    response = admin_client.post(reverse("admin:replays_whatif_apply", args=[run.pk]), follow=True)
    assert "Saved vision guarantee of nvidia-h100-80gb: 16 -&gt; 8." in response.content.decode()
    quota.refresh_from_db()
    assert quota.guaranteed == 8
    entry = AuditEntry.objects.get(action="quota.change")
    assert entry.actor_name == "root" and entry.changes == {"guaranteed": [16, 8]}
    assert entry.project == tenant.project
    run.refresh_from_db()
    assert run.applied_at is not None and run.applied_by_name == "root"
    again = admin_client.post(reverse("admin:replays_whatif_apply", args=[run.pk]), follow=True)
    assert "already applied" in again.content.decode()
    assert AuditEntry.objects.filter(action="quota.change").count() == 1


def cell(page: str, row_id: str) -> str:
    """The HTML of one table row of the result page, by its id."""
    found = re.search(rf'<tr[^>]*id="{re.escape(row_id)}"[^>]*>(.*?)</tr>', page, re.S)
    assert found, f"no row {row_id}"
    return found.group(1)


@pytest.fixture
def now_on_a100(tenant, inventory):
    """Vision on A100 now (16 devices; vision holds a guarantee of 8 and may not borrow): one 8-device job
    running for 19 minutes of its 2 hours, two waiting for the devices it holds."""
    now, a100 = timezone.now(), inventory["a100"]
    running = make_active_job(tenant.project, a100, submitted=now - timedelta(minutes=20),
                              started=now - timedelta(minutes=19), duration=7200, max_runtime=14400,
                              cluster=inventory["cluster"])
    waiting = [make_active_job(tenant.project, a100, submitted=now - timedelta(minutes=m), max_runtime=1800)
               for m in (5, 4)]
    return [running, *waiting]


def test_jobs_waiting_and_running_now_make_a_quota_change_show_gains(
        history, now_on_a100, admin_client, django_capture_on_commit_callbacks):
    """The history alone (finished H100 jobs) is the same under both configurations: before the jobs waiting
    and running now were replayed, every A100 change showed "Gain: nobody. Lose: nobody."."""
    run = start(admin_client, django_capture_on_commit_callbacks, project="vision", flavor="nvidia-a100-40gb",
                quota_field="guaranteed", quota_value=16)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    cmp = run.comparison[0]
    assert cmp["gainers"] == ["vision"] and cmp["losers"] == []
    assert run.jobs == 19 and run.history == {"exported": 19, "finished": 16, "running": 1, "waiting": 2,
                                              "not_run": 1}
    assert cmp["projects"]["speech"]["verdict"] == "same"  # no A100 jobs: the change does not touch it
    a100 = cmp["by_flavor"]["projects"]["vision"]["nvidia-a100-40gb"]
    assert a100["jobs"]["a"] == 3 and a100["verdict"] == "gains"
    assert a100["wait_mean"]["b"] < a100["wait_mean"]["a"] - 600
    page = admin_client.get(reverse("admin:replays_whatif_result", args=[run.pk])).content.decode()
    assert "Gain: <strong>vision</strong>" in page and "Lose: <strong>nobody</strong>" in page
    assert "16 finished, 1 running now, 2 waiting now" in page


def test_guarantees_are_shown_per_flavor_never_added_up(
        history, now_on_a100, admin_client, django_capture_on_commit_callbacks):
    run = start(admin_client, django_capture_on_commit_callbacks, project="vision", flavor="nvidia-a100-40gb",
                quota_field="guaranteed", quota_value=16)
    page = admin_client.get(reverse("admin:replays_whatif_result", args=[run.pk])).content.decode()
    # vision holds 16 H100 and 8 -> 16 A100: never "24 -> 32" devices of no flavor.
    assert "24 &rarr; 32" not in page and "24" not in cell(page, "row-nvidia-h100-80gb-vision")
    assert ">16</td>" in cell(page, "row-nvidia-h100-80gb-vision")
    assert "8 &rarr; 16" in cell(page, "row-nvidia-a100-40gb-vision")
    assert ">16</td>" in cell(page, "row-nvidia-h100-80gb-speech")
    a100_rows = page.split('id="flavor-nvidia-a100-40gb"')[1].split('id="flavor-nvidia-h100-80gb"')[0]
    assert "vision" in a100_rows and "speech" not in a100_rows  # speech: no A100 quota, no A100 jobs
    flavor_rows = {f: cell(page, f"flavor-{f}") for f in ("nvidia-h100-80gb", "nvidia-a100-40gb")}
    assert "32 of 32" in flavor_rows["nvidia-h100-80gb"] and "8 &rarr; 16 of 16" in flavor_rows["nvidia-a100-40gb"]
    # the per-project table has no device column left that could add flavors up
    assert "guarantee" not in page.split('id="difference"')[1].split("</table>")[0]
    share = run.summary[1]["by_flavor"]["projects"]["vision"]
    assert share["nvidia-a100-40gb"]["guarantee_share"] == 1.0 and share["nvidia-h100-80gb"]["guarantee_share"] == 0.5


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


@pytest.mark.parametrize("change, field", [
    ({"quota_value": -1}, "quota_value"),
    ({"quota_value": "many"}, "quota_value"),
    ({"project": "no-such-project"}, "project"),
    ({"flavor": "tpu-v9"}, "flavor"),
    ({"kind": "teleport"}, "kind"),
    ({"days": 0}, "days"),
])
def test_bad_input_names_the_field(history, admin_client, change, field):
    response = admin_client.post(FORM, {"days": 7, "kind": "quota", "project": "vision",
                                        "flavor": "nvidia-h100-80gb", "quota_field": "guaranteed", "quota_value": 8,
                                        **change})
    assert field in errors_of(response)
    assert ReplayRun.objects.count() == 0


def errors_of(response) -> dict[str, list[str]]:
    assert response.status_code == 200  # the form again, never a 500
    return {name: list(errors) for name, errors in response.context["form"].errors.items()}


@pytest.mark.parametrize("change, field, message", [
    ({"project": "vision", "flavor": "nvidia-h100-80gb", "quota_field": "guaranteed", "quota_value": 16},
     "quota_value", "vision's guarantee of nvidia-h100-80gb is already 16: the proposed change changes nothing"),
    ({"project": "vision", "flavor": "nvidia-h100-80gb", "quota_field": "borrow_limit", "quota_value": 8},
     "quota_value", "vision's borrow limit of nvidia-h100-80gb is already 8"),
    # speech has no A100 quota at all: a guarantee of 0 is what it has
    ({"project": "speech", "flavor": "nvidia-a100-40gb", "quota_field": "guaranteed", "quota_value": 0},
     "quota_value", "speech's guarantee of nvidia-a100-40gb (no quota, i.e. 0) is already 0"),
    ({"kind": "priority", "priority_name": "low", "priority_value": 100},
     "priority_value", "The value of priority class low is already 100"),
    ({"kind": "policy", "policy_field": "blocking", "policy_value": "backfill"},
     "policy_value", "The scheduling policy's blocking is already backfill"),
])
def test_a_change_that_changes_nothing_is_refused(history, admin_client, change, field, message):
    response = admin_client.post(FORM, {"days": 7, "kind": "quota", **change})
    errors = errors_of(response)
    assert list(errors) == [field] and message in errors[field][0]
    assert message.replace("'", "&#x27;") in response.content.decode()
    assert ReplayRun.objects.count() == 0


def test_the_same_value_for_another_project_or_flavor_is_a_change(history, admin_client,
                                                                  django_capture_on_commit_callbacks):
    # 16 is vision's H100 guarantee, not its A100 one (8): a real change, replayed.
    run = start(admin_client, django_capture_on_commit_callbacks, project="vision", flavor="nvidia-a100-40gb",
                quota_field="guaranteed", quota_value=16)
    assert run.change["before"] == 8 and run.change["warnings"] == []


H100_WARNING = "A guarantee of 40 is above the 32 nvidia-h100-80gb devices the cluster has"
SUM_WARNING = ("The guarantees of nvidia-h100-80gb in acme would add up to 56 devices (speech 16, vision 40), above "
               "the 32 the cluster has")


def test_a_guarantee_above_the_hardware_is_warned_and_replayed_only_when_confirmed(
        history, admin_client, django_capture_on_commit_callbacks):
    change = {"days": 7, "kind": "quota", "project": "vision", "flavor": "nvidia-h100-80gb",
              "quota_field": "guaranteed", "quota_value": 40}
    response = admin_client.post(FORM, change)
    assert errors_of(response) == {}
    assert response.context["form"].warnings == {"quota_value": [
        f"{H100_WARNING}: it can never be honoured in full.", f"{SUM_WARNING}: they cannot all be honoured at once."]}
    page = response.content.decode()
    assert f"Warning: {H100_WARNING}" in page and 'name="run_anyway"' in page
    ticked = re.search(r'name="run_anyway" id="id_run_anyway"\s+value="(\w+)"', page).group(1)
    # ticked for these warnings, but then the value changed: its own warnings are shown, nothing runs
    response = admin_client.post(FORM, {**change, "quota_value": 48, "run_anyway": ticked})
    assert "A guarantee of 48 is above the 32" in response.content.decode()
    assert admin_client.post(FORM, {**change, "run_anyway": "on"}).status_code == 200
    assert ReplayRun.objects.count() == 0

    run = start(admin_client, django_capture_on_commit_callbacks, **{**change, "run_anyway": ticked})
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    page = admin_client.get(reverse("admin:replays_whatif_result", args=[run.pk])).content.decode()
    assert f"Warning: {H100_WARNING}" in page and "Warning: The guarantees of nvidia-h100-80gb in acme" in page


def test_the_guarantees_of_an_organization_above_the_hardware_are_warned(history, admin_client):
    # 24 fits in the 32 H100 devices, but with speech's 16 acme would promise 40.
    response = admin_client.post(FORM, {"days": 7, "kind": "quota", "project": "vision",
                                        "flavor": "nvidia-h100-80gb", "quota_field": "guaranteed",
                                        "quota_value": 24})
    assert response.context["form"].warnings == {"quota_value": [
        "The guarantees of nvidia-h100-80gb in acme would add up to 40 devices (speech 16, vision 24), above the 32 "
        "the cluster has: they cannot all be honoured at once."]}
    assert ReplayRun.objects.count() == 0


def test_another_organizations_guarantees_are_not_added_to_this_ones(
        history, tenant, inventory, admin_client, django_capture_on_commit_callbacks):
    # globex promises its own project all 32 H100; acme's guarantees (vision 12 + speech 16) still fit.
    Quota.objects.create(project=tenant.other_project, flavor=inventory["h100"], guaranteed=32)
    run = start(admin_client, django_capture_on_commit_callbacks, project="vision", flavor="nvidia-h100-80gb",
                quota_field="guaranteed", quota_value=12)
    assert run.change["warnings"] == []
    # ... while a change to globex's own guarantee is checked against globex's guarantees alone
    response = admin_client.post(FORM, {"days": 7, "kind": "quota", "project": "secret",
                                        "flavor": "nvidia-h100-80gb", "quota_field": "guaranteed",
                                        "quota_value": 33})
    assert response.context["form"].warnings == {"quota_value": [
        "A guarantee of 33 is above the 32 nvidia-h100-80gb devices the cluster has: it can never be honoured in "
        "full."]}


def test_a_borrow_limit_above_the_hardware_is_not_a_guarantee_warning(history, admin_client,
                                                                      django_capture_on_commit_callbacks):
    run = start(admin_client, django_capture_on_commit_callbacks, project="vision", flavor="nvidia-h100-80gb",
                quota_field="borrow_limit", quota_value=64)
    assert run.change["warnings"] == []


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


def test_non_staff_cannot_start_a_what_if(history, tenant):
    client = Client()
    client.force_login(tenant.users["owner"])  # owns vision, but is not platform staff
    response = client.post(FORM, {"days": 7, "kind": "quota", "project": "vision", "flavor": "nvidia-a100-40gb",
                                  "quota_field": "guaranteed", "quota_value": 16})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert ReplayRun.objects.count() == 0
