"""Alerts through ingestion, the hung-run check, the actions on the job, webhooks (signed, never to a private
address) and the alert-rule and webhook API."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
from datetime import timedelta
from unittest import mock

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.models import JobEvent
from jobs.states import State
from notifications import webhooks
from tenancy.models import AuditEntry, Membership, Project, Role
from tests.crosstenant import CrossTenantMixin
from tests.jobs.conftest import inventory, run, submit  # noqa: F401  (fixtures)
from tracking import alerts, services
from tracking.models import Alert, AlertRule, Run, Webhook

pytestmark = pytest.mark.django_db

SECRET = "s3cret-s3cret-s3cret"


def log(run_id: int, key: str, step: int, value) -> int:
    return services.run_log_batch(run_id=run_id, metrics=[{"key": key, "step": step, "value": value}])


def running_job_run(tenant, inventory, **spec):  # noqa: F811
    job = run(submit(tenant, inventory["h100"], **spec), inventory["cluster"], ["r1-n1"])
    return job, Run.objects.get(job=job)


# ------------------------------------------------------------------------------------------- through ingestion

def test_a_nan_opens_one_alert_while_it_lasts_and_it_resolves_when_it_clears(run):
    log(run.pk, "train/loss", 1, 2.5)
    log(run.pk, "train/loss", 2, "NaN")
    log(run.pk, "train/loss", 3, "NaN")
    alert = Alert.objects.get(run=run)
    assert (alert.rule, alert.key, alert.step, alert.resolved_at) == ("non_finite", "train/loss", 2, None)
    log(run.pk, "train/loss", 4, 2.4)
    alert.refresh_from_db()
    assert alert.resolved_at is not None and Alert.objects.filter(run=run).count() == 1
    log(run.pk, "train/loss", 5, "Infinity")  # a new occurrence: a new alert
    assert Alert.objects.filter(run=run, resolved_at=None).count() == 1 and Alert.objects.count() == 2


def test_a_condition_that_comes_and_goes_within_a_batch_opens_one_alert_with_a_bounded_number_of_statements(
        run, django_assert_max_num_queries, django_capture_on_commit_callbacks):
    """A noisy throughput (every other point under half the median) opened and resolved an alert at every point,
    each a few statements under the run's row lock and two notifications: a load test's 10,000-point batch held
    the lock 16 s, and one run got 805 alerts in 25 s. Within a batch, a rule and key now open at most one alert
    (at its first firing point) and resolve it once when the batch ends clear."""
    log(run.pk, "train/tokens_per_s", 0, 100.0)  # the series' first point, and the run's series made
    steady = [{"key": "train/tokens_per_s", "step": step, "value": 100.0} for step in range(1, 20)]
    services.run_log_batch(run_id=run.pk, metrics=steady)
    noisy = [{"key": "train/tokens_per_s", "step": step, "value": 10.0 if step % 2 else 100.0}
             for step in range(20, 2_021)]  # ends on a steady point
    with django_assert_max_num_queries(20), django_capture_on_commit_callbacks() as notified:
        services.run_log_batch(run_id=run.pk, metrics=noisy)
    (alert,) = Alert.objects.filter(run=run)
    assert (alert.rule, alert.step, alert.resolved_at is not None) == ("throughput_drop", 21, True)
    assert len(notified) == 2  # opened, resolved
    services.run_log_batch(run_id=run.pk, metrics=[{"key": "train/tokens_per_s", "step": 2_021, "value": 10.0}])
    assert Alert.objects.filter(run=run, resolved_at=None).count() == 1  # a later batch: a new occurrence


def test_a_refused_batch_opens_no_alert(run):
    with pytest.raises(services.BatchError):
        services.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "step": 1, "value": "NaN"},
                                                       {"key": "loss", "step": "x", "value": 1}])
    assert not Alert.objects.exists()
    run.refresh_from_db()
    assert run.detector_state == {} and run.last_step is None


def test_the_rolling_state_lives_on_the_run_and_a_disabled_rule_is_silent(run, tenant):
    services.run_log_batch(run_id=run.pk, metrics=[{"key": "train/loss", "step": s, "value": 3.0 - s / 1000}
                                                   for s in range(30)])
    run.refresh_from_db()
    assert len(run.detector_state["keys"]["train/loss"]["w"]) == 30 and run.last_step == 29
    AlertRule.objects.create(project=tenant.project, rule="non_finite", enabled=False)
    log(run.pk, "train/loss", 30, "NaN")
    assert not Alert.objects.exists()


def test_the_next_batch_sees_a_rule_changed_or_deleted_since_the_last(run, tenant):
    """The project's rules are kept per process between batches: a write through the API's service (or the ORM)
    is seen by the very next batch."""
    rule = AlertRule.objects.create(project=tenant.project, rule="non_finite", enabled=False)
    log(run.pk, "train/loss", 1, "NaN")
    services.alert_rule_save(actor=tenant.users["owner"], rule=rule, values={"enabled": True})
    log(run.pk, "train/loss", 2, 1.0)
    log(run.pk, "train/loss", 3, "NaN")
    assert Alert.objects.get(run=run).step == 3
    services.alert_rule_save(actor=tenant.users["owner"], rule=rule, values={"enabled": False})
    log(run.pk, "acc", 4, "NaN")
    services.alert_rule_delete(actor=tenant.users["owner"], rule=rule)  # back to the default: enabled
    log(run.pk, "acc", 5, "NaN")
    assert list(Alert.objects.filter(key="acc").values_list("step", flat=True)) == [5]


def test_a_spike_threshold_comes_from_the_project(run, tenant):
    AlertRule.objects.create(project=tenant.project, rule="loss_spike", params={"z": 500})
    services.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "step": s, "value": 2.0 + (s % 3) / 100}
                                                   for s in range(40)])
    log(run.pk, "loss", 40, 2.5)  # ~25 robust deviations: under 500
    assert not Alert.objects.exists()
    log(run.pk, "loss", 41, 50.0)
    assert Alert.objects.get().rule == "loss_spike"


# ------------------------------------------------------------------------------------------- out of order

def decaying_loss(steps: range) -> list[dict]:
    """A loss falling from 10 toward 2 with a little deterministic noise: a late batch judged against the run's
    latest values instead of those before it would look like a spike."""
    return [{"key": "train/loss", "step": s, "value": (2 + 8 * 0.997 ** s) * (1 + ((s * 7919) % 11 - 5) / 500)}
            for s in steps]


def with_faults(points: list[dict], nan: int, spike: int) -> list[dict]:
    return [{**p, "value": "NaN"} if p["step"] == nan else {**p, "value": p["value"] * 3} if p["step"] == spike
            else p for p in points]


def test_batches_arriving_after_later_ones_open_their_alerts(run):
    """The spool of a sender cut off by an outage arrives after what the process logged since: its NaN and its
    spike open alerts, which close at once (the later points, judged already, were healthy)."""
    log_points = with_faults(decaying_loss(range(600)), nan=250, spike=330)
    services.run_log_batch(run_id=run.pk, metrics=log_points[:200])
    services.run_log_batch(run_id=run.pk, metrics=log_points[400:])  # live again
    services.run_log_batch(run_id=run.pk, metrics=log_points[200:300])  # the spool, after
    services.run_log_batch(run_id=run.pk, metrics=log_points[300:400])
    alerts = list(Alert.objects.filter(run=run).order_by("step"))
    assert [(a.rule, a.step) for a in alerts] == [("non_finite", 250), ("loss_spike", 330)]
    assert all(a.resolved_at is not None for a in alerts)
    run.refresh_from_db()
    assert run.last_step == 599 and run.detector_state["keys"]["train/loss"]["s"] == 599


def test_a_retried_batch_opens_no_second_alert_but_a_changed_point_is_judged(run):
    log(run.pk, "train/loss", 1, 2.0)
    log(run.pk, "train/loss", 2, "NaN")
    log(run.pk, "train/loss", 3, 2.0)  # resolves it
    log(run.pk, "train/loss", 2, "NaN")  # the response to the NaN was lost: the same point again
    assert Alert.objects.filter(run=run).count() == 1
    log(run.pk, "train/loss", 1, "NaN")  # a point logged again with another value is new
    assert list(Alert.objects.filter(run=run).order_by("id").values_list("step", flat=True)) == [2, 1]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_senders_of_one_run_open_the_alerts_of_every_batch(run):
    """Four senders (MLflow's asynchronous logging, a spool draining beside live logging) deliver one series'
    batches, each its own in order, in whatever order their requests take the run's lock."""
    from django.db import connection, connections

    if connection.vendor != "postgresql":
        pytest.skip("concurrency is tested on PostgreSQL (CI sets DATABASE_URL); SQLite serializes all writers")
    points = with_faults(decaying_loss(range(1200)), nan=610, spike=905)
    services.run_log_batch(run_id=run.pk, metrics=points[:200])
    batches = [points[i:i + 50] for i in range(200, 1200, 50)]
    errors: list[BaseException] = []

    def sender(mine: list[list[dict]]) -> None:
        try:
            for batch in mine:
                services.run_log_batch(run_id=run.pk, metrics=batch)
        except BaseException as error:  # surfaced below: a thread's failure must fail the test
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sender, args=(batches[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    opened = sorted(Alert.objects.filter(run=run).values_list("rule", "step"))
    assert opened == [("loss_spike", 905), ("non_finite", 610)]


# ---------------------------------------------------------------------------------------------------- actions

def test_the_stop_action_cancels_the_job_with_the_alert_as_reason(tenant, inventory):  # noqa: F811
    AlertRule.objects.create(project=tenant.project, rule="non_finite", action="stop")
    job, job_run = running_job_run(tenant, inventory)
    log(job_run.pk, "train/loss", 7, "NaN")
    job.refresh_from_db()
    job_run.refresh_from_db()
    assert job.state == State.CANCELLED and job_run.status == "KILLED"
    event = JobEvent.objects.filter(job=job, to_state=State.CANCELLED).get()
    assert "stopped by alert non_finite on train/loss" in event.reason and event.actor_name == "tidal-alerts"
    assert event.details["alert"] == Alert.objects.get(run=job_run).pk
    with pytest.raises(services.RunFinished):  # the job's process learns it was stopped
        log(job_run.pk, "train/loss", 8, 1.0)


def test_the_restart_action_retries_from_the_checkpoint_within_the_retry_limit(tenant, inventory):  # noqa: F811
    AlertRule.objects.create(project=tenant.project, rule="non_finite", action="restart")
    job, job_run = running_job_run(tenant, inventory, retry_limit=1)
    log(job_run.pk, "train/loss", 7, "NaN")
    job.refresh_from_db()
    assert job.state == State.RETRYING and job.retry_at is not None
    event = JobEvent.objects.filter(job=job, to_state=State.RETRYING).get()
    assert "restart 1/1 from the latest checkpoint, by alert non_finite" in event.reason


# --------------------------------------------------------------------------------------------------- hung runs

def test_a_running_job_whose_run_stopped_logging_gets_a_hung_alert_and_one_that_logs_does_not(
        tenant, inventory):  # noqa: F811
    stuck_job, stuck = running_job_run(tenant, inventory, name="stuck")
    _, alive = running_job_run(tenant, inventory, name="alive")
    _, silent = running_job_run(tenant, inventory, name="never-logs")  # does not use tracking: not "hung"
    log(stuck.pk, "loss", 100, 1.0)
    log(alive.pk, "loss", 100, 1.0)
    later = timezone.now() + timedelta(minutes=16)
    Run.objects.filter(pk=alive.pk).update(last_step_at=later - timedelta(minutes=1))
    assert alerts.check_hung_runs(now=later) == 1
    alert = Alert.objects.get()
    assert (alert.run_id, alert.rule, alert.step) == (stuck.pk, "hung_run", 100)
    assert alerts.check_hung_runs(now=later + timedelta(minutes=5)) == 0  # open once
    log(stuck.pk, "loss", 101, 1.0)  # it moves again
    alert.refresh_from_db()
    assert alert.resolved_at is not None
    assert not Alert.objects.filter(run=silent).exists()


def test_the_hung_threshold_comes_from_the_project(tenant, inventory):  # noqa: F811
    AlertRule.objects.create(project=tenant.project, rule="hung_run", params={"minutes": 60})
    _, stuck = running_job_run(tenant, inventory)
    log(stuck.pk, "loss", 1, 1.0)
    assert alerts.check_hung_runs(now=timezone.now() + timedelta(minutes=30)) == 0
    assert alerts.check_hung_runs(now=timezone.now() + timedelta(minutes=61)) == 1


def test_the_periodic_task_is_in_the_beat_schedule_and_the_embedded_loops(settings):
    from core.embedded import EMBEDDED_LOOPS

    assert settings.CELERY_BEAT_SCHEDULE["tracking-hung-runs"]["task"] == "tracking.tasks.check_hung_runs"
    assert "tracking-hung-runs" in {name for name, *_ in EMBEDDED_LOOPS}


# ---------------------------------------------------------------------------------------------------- webhooks

def test_a_webhook_gets_the_opening_and_the_resolution_signed(run, tenant, django_capture_on_commit_callbacks):
    Webhook.objects.create(project=tenant.project, url="https://hooks.example.com/tidal?x=1", secret=SECRET)
    public = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 443))]
    with mock.patch("notifications.webhooks._send", return_value=204) as send, \
            mock.patch("socket.getaddrinfo", return_value=public):
        with django_capture_on_commit_callbacks(execute=True):
            log(run.pk, "loss", 1, "NaN")
        with django_capture_on_commit_callbacks(execute=True):
            log(run.pk, "loss", 2, 1.0)
    assert send.call_count == 2
    (parts, address, body, headers), _ = send.call_args_list[0]
    assert (parts.hostname, parts.query, address) == ("hooks.example.com", "x=1", "93.184.215.14")
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Tidal-Signature"] == expected and headers["X-Tidal-Event"] == "alert.opened"
    payload = json.loads(body)
    assert payload["event"] == "alert.opened" and payload["project"] == tenant.project.slug
    assert payload["alert"]["rule"] == "non_finite" and payload["alert"]["value"] is None  # NaN is stored as NULL
    assert payload["run"]["id"] == run.pk
    resolved = json.loads(send.call_args_list[1].args[2])
    assert resolved["event"] == "alert.resolved" and resolved["alert"]["resolved_at"]
    assert payload["alert"]["resolution"] is None and resolved["alert"]["resolution"] == "cleared"


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/hook", "http://10.1.2.3/hook",
                                 "http://169.254.169.254/latest/meta-data/", "http://[::1]/hook",
                                 "http://[::ffff:10.0.0.1]/x", "http://localhost/hook", "http://224.0.0.1/",
                                 "ftp://hooks.example.com/", "https://user:pw@hooks.example.com/"])
def test_private_and_malformed_targets_are_refused_without_a_request(url):
    with mock.patch("notifications.webhooks._send") as send, pytest.raises(webhooks.Refused):
        webhooks.deliver(url, SECRET, b"{}", "alert.opened")
    send.assert_not_called()


def test_a_host_name_resolving_to_a_private_address_is_refused():
    answers = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 443)),
               (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", 443))]  # one bad answer is enough
    with mock.patch("socket.getaddrinfo", return_value=answers), mock.patch("notifications.webhooks._send") as send, \
            pytest.raises(webhooks.Refused):
        webhooks.deliver("https://rebind.example.com/", SECRET, b"{}", "alert.opened")
    send.assert_not_called()


def test_private_targets_are_allowed_with_the_setting(settings):
    settings.TIDAL_WEBHOOK_ALLOW_PRIVATE = True
    with mock.patch("notifications.webhooks._send", return_value=200) as send:
        assert webhooks.deliver("http://10.1.2.3/hook", SECRET, b"{}", "alert.opened") == 200
    assert send.call_args.args[1] == "10.1.2.3"


def test_a_failing_target_is_retried_and_a_redirect_is_not_followed(run, tenant):
    from notifications.tasks import deliver_webhook_task

    hook = Webhook.objects.create(project=tenant.project, url="http://93.184.215.14/hook", secret=SECRET)
    with mock.patch("notifications.webhooks._send", side_effect=[503, OSError("reset"), 200]) as send:
        deliver_webhook_task.delay(hook.pk, "{}", "alert.opened")
    assert send.call_count == 3
    with mock.patch("notifications.webhooks._send", return_value=302) as send:
        deliver_webhook_task.delay(hook.pk, "{}", "alert.opened")
    assert send.call_count == 1


def test_owners_get_an_email_when_a_mail_server_is_configured(run, tenant, settings, mailoutbox,
                                                              django_capture_on_commit_callbacks):
    settings.EMAIL_HOST = "smtp.example.com"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    with django_capture_on_commit_callbacks(execute=True):
        log(run.pk, "loss", 1, "NaN")
    assert len(mailoutbox) == 1 and mailoutbox[0].to == [tenant.users["owner"].email]
    assert "non_finite opened" in mailoutbox[0].subject


# --------------------------------------------------------------------------------------------------------- API

class TestAlertRules(CrossTenantMixin):
    basename = "alertrule"

    def make_object(self, tenant, project):
        return AlertRule.objects.create(project=project, rule="loss_spike", params={"z": 8})

    def create_payload(self, tenant, project):
        return {"project": project.slug, "rule": "grad_norm_explosion", "params": {"factor": 20}}

    def update_payload(self, tenant, obj):
        return {"params": {"z": 9}}

    def test_an_admin_writes_a_member_reads(self, tenant, clients):
        payload = self.create_payload(tenant, tenant.project)
        assert clients["member"].post(self.list_url(), payload, format="json").status_code == 403
        response = clients["admin"].post(self.list_url(), {**payload, "action": "stop"}, format="json")
        assert response.status_code == 201, response.content
        body = response.json()
        assert body["params"] == {"factor": 20.0} and body["defaults"]["factor"] == 10.0
        listed = clients["member"].get(self.list_url(), {"project": tenant.project.slug}).json()
        assert [row["rule"] for row in listed["results"]] == ["grad_norm_explosion"]

    @pytest.mark.parametrize(("payload", "field"), [
        ({"rule": "loss_spike", "params": {"z": -3}}, "params.z"),
        ({"rule": "loss_spike", "params": {"window": "big"}}, "params.window"),
        ({"rule": "throughput_drop", "params": {"fraction": 2}}, "params.fraction"),
        ({"rule": "hung_run", "params": {"hours": 1}}, "params.hours"),
        ({"rule": "melting", "params": {}}, "rule"),
        ({"rule": "non_finite", "action": "explode"}, "action"),
    ])
    def test_bad_thresholds_are_a_400_naming_the_field(self, tenant, clients, payload, field):
        response = clients["admin"].post(self.list_url(), {"project": tenant.project.slug, **payload}, format="json")
        assert response.status_code == 400 and field in response.json()["error"]["fields"], response.content

    @pytest.mark.parametrize("payload", [
        {"rule": "loss_spike", "params": {"z": -3}}, {"rule": "melting"}, {"rule": "non_finite", "action": "boom"},
        {"rule": "loss_spike", "params": {"window": 200}},  # a good one: 403 all the same
    ])
    @pytest.mark.parametrize("role", ["viewer", "member"])
    def test_a_caller_without_the_role_gets_403_whatever_the_body(self, tenant, clients, payload, role):
        """The role is checked before the body: a viewer learns nothing from a 400 about a rule it may not write."""
        response = clients[role].post(self.list_url(), {"project": tenant.project.slug, **payload}, format="json")
        assert response.status_code == 403, response.content
        assert not AlertRule.objects.exists()

    def test_a_bad_update_is_a_400_too(self, tenant, clients):
        rule = self.victim(tenant)
        response = clients["admin"].patch(self.detail_url(rule), {"params": {"min_points": 500}}, format="json")
        assert response.status_code == 400 and "params.min_points" in response.json()["error"]["fields"]


class TestWebhooks(CrossTenantMixin):
    basename = "webhook"
    viewer_can_see = False  # admins only: a hook URL often is a credential

    def make_object(self, tenant, project):
        return Webhook.objects.create(project=project, url="https://hooks.example.com/a", secret=SECRET)

    def create_payload(self, tenant, project):
        return {"project": project.slug, "url": "https://hooks.example.com/b", "secret": SECRET}

    def update_payload(self, tenant, obj):
        return {"url": "https://evil.example.com/"}

    def test_the_secret_is_write_only_and_members_see_no_webhooks(self, tenant, clients):
        response = clients["admin"].post(self.list_url(), self.create_payload(tenant, tenant.project), format="json")
        assert response.status_code == 201 and "secret" not in response.json()
        assert Webhook.objects.get().secret == SECRET
        assert clients["member"].get(self.list_url()).json()["results"] == []

    @pytest.mark.parametrize("url", ["http://169.254.169.254/latest/", "http://127.0.0.1/", "http://10.0.0.1/",
                                     "gopher://hooks.example.com/"])
    def test_a_private_url_is_a_400_on_url(self, tenant, clients, url):
        response = clients["admin"].post(self.list_url(), {**self.create_payload(tenant, tenant.project),
                                                           "url": url}, format="json")
        assert response.status_code == 400 and "url" in response.json()["error"]["fields"]

    def test_a_member_posting_a_bad_webhook_gets_403(self, tenant, clients):
        response = clients["member"].post(self.list_url(), {**self.create_payload(tenant, tenant.project),
                                                            "url": "http://10.0.0.1/", "secret": "short"},
                                          format="json")
        assert response.status_code == 403, response.content

    def test_a_short_secret_is_a_400_on_secret(self, tenant, clients):
        response = clients["admin"].post(self.list_url(), {**self.create_payload(tenant, tenant.project),
                                                           "secret": "short"}, format="json")
        assert response.status_code == 400 and "secret" in response.json()["error"]["fields"]


def test_the_alert_list_stays(tenant, clients, run):
    log(run.pk, "loss", 1, "NaN")
    rows = clients["viewer"].get(reverse("alert-list")).json()["results"]
    assert [row["rule"] for row in rows] == ["non_finite"]


def test_the_alert_list_filters_on_a_project_and_refuses_one_it_cannot_see(tenant, clients, run):
    """`?project=` was ignored: every project's alerts came back."""
    log(run.pk, "loss", 1, "NaN")
    mine = Project.objects.create(organization=tenant.organization, name="Speech", slug="speech")
    Membership.objects.create(project=mine, user=tenant.users["viewer"], role=Role.VIEWER)
    log(services.run_create(project=mine, name="other").pk, "loss", 1, "Infinity")
    viewer = clients["viewer"]
    assert [row["run"] for row in viewer.get(reverse("alert-list") + "?project=vision").json()["results"]] == [run.pk]
    assert len(viewer.get(reverse("alert-list")).json()["results"]) == 2
    for unknown in ("secret", "nope"):
        response = viewer.get(reverse("alert-list") + f"?project={unknown}")
        assert response.status_code == 400 and "project" in response.json()["error"]["fields"], response.content


# ------------------------------------------------------------------------------- acknowledge, resolve, mute

def open_nan(run) -> Alert:
    log(run.pk, "train/loss", 1, 2.0)
    log(run.pk, "train/loss", 2, "NaN")
    return Alert.objects.get(run=run, resolved_at=None)


def test_a_member_acknowledges_then_resolves_an_alert_by_hand(run, clients, django_capture_on_commit_callbacks):
    alert = open_nan(run)
    url = reverse("alert-acknowledge", args=[alert.pk])
    assert clients["viewer"].post(url).status_code == 403
    body = clients["member"].post(url).json()
    assert body["acknowledged_by"] == "member" and body["acknowledged_at"] and body["resolved_at"] is None
    again = clients["admin"].post(url).json()  # acknowledging again changes nothing
    assert again["acknowledged_by"] == "member"
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        resolved = clients["member"].post(reverse("alert-resolve", args=[alert.pk])).json()
    assert resolved["resolution"] == "resolved" and resolved["resolved_by"] == "member" and resolved["resolved_at"]
    assert len(callbacks) == 1  # the resolution is notified once
    assert clients["member"].post(reverse("alert-resolve", args=[alert.pk])).status_code == 200  # idempotent
    log(run.pk, "train/loss", 3, "NaN")  # the condition lasts: not opened again
    assert Alert.objects.filter(run=run).count() == 1
    log(run.pk, "train/loss", 4, 2.0)
    log(run.pk, "train/loss", 5, "NaN")  # a new occurrence
    assert Alert.objects.filter(run=run, resolved_at=None).count() == 1


def test_muting_a_rule_on_a_run_closes_its_alerts_and_opens_no_more_there(run, tenant, clients):
    alert = open_nan(run)
    other = services.run_create(project=tenant.project, name="other", user=tenant.users["member"])
    url = reverse("run-mute", args=[run.pk])
    assert clients["viewer"].post(url, {"rule": "non_finite"}, format="json").status_code == 403
    bad = clients["member"].post(url, {"rule": "melting"}, format="json")
    assert bad.status_code == 400 and "rule" in bad.json()["error"]["fields"]
    muted = clients["member"].post(url, {"rule": "non_finite"}, format="json")
    assert muted.status_code == 200 and muted.json()["muted_rules"] == ["non_finite"]
    alert.refresh_from_db()
    assert alert.resolution == "muted" and alert.resolved_by == "member"
    log(run.pk, "train/loss", 3, 2.0)
    log(run.pk, "train/loss", 4, "NaN")
    log(run.pk, "train/loss", 5, 100.0)
    assert not Alert.objects.filter(run=run, resolved_at=None, rule="non_finite").exists()
    log(other.pk, "train/loss", 1, "NaN")  # only that run
    assert Alert.objects.filter(run=other, resolved_at=None).count() == 1
    assert AuditEntry.objects.filter(action="run.mute", project=tenant.project).exists()
    unmuted = clients["member"].post(reverse("run-unmute", args=[run.pk]), {"rule": "non_finite"}, format="json")
    assert unmuted.json()["muted_rules"] == []
    log(run.pk, "train/loss", 6, 2.0)
    log(run.pk, "train/loss", 7, "NaN")
    assert Alert.objects.filter(run=run, resolved_at=None).count() == 1


def test_muting_a_whole_run_silences_every_rule_and_its_actions(tenant, inventory):  # noqa: F811
    AlertRule.objects.create(project=tenant.project, rule="non_finite", action="stop")
    job, job_run = running_job_run(tenant, inventory)
    alerts.run_mute(actor=tenant.users["member"], run=job_run)
    assert Run.objects.get(pk=job_run.pk).muted_rules == ["*"]
    log(job_run.pk, "train/loss", 1, "NaN")
    job.refresh_from_db()
    assert not Alert.objects.exists() and job.state == State.RUNNING  # no alert, no stop
    alerts.run_unmute(actor=tenant.users["member"], run=job_run)
    log(job_run.pk, "train/loss", 2, "NaN")  # still firing: judged firing since step 1, so it does not open anew
    log(job_run.pk, "train/loss", 3, 1.0)
    log(job_run.pk, "train/loss", 4, "NaN")
    job.refresh_from_db()
    assert Alert.objects.filter(run=job_run).count() == 1 and job.state == State.CANCELLED


def test_a_run_that_ends_closes_its_open_alerts(tenant, inventory, django_capture_on_commit_callbacks):  # noqa: F811
    job, job_run = running_job_run(tenant, inventory)
    alert = open_nan(job_run)
    from jobs import lifecycle
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.transition(job, State.FAILED, reason="exit 1", actor="test",
                             end=lifecycle.AttemptEnd(reason="exit 1", cause="unknown"))
    alert.refresh_from_db()
    assert alert.resolved_at is not None and alert.resolution == "run_ended"
    notebook = services.run_create(project=tenant.project, name="notebook", user=tenant.users["member"])
    alert = open_nan(notebook)
    services.run_update(run=notebook, status="FINISHED")
    alert.refresh_from_db()
    assert alert.resolution == "run_ended"
