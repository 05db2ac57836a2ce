"""The ingestion endpoint: all or nothing, idempotent, NaN/Inf kept, bad input named, tenancy held."""

from __future__ import annotations

import math

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tenancy.models import Membership
from tenancy.services import membership_change_role, membership_remove
from tests.conftest import client_for
from tests.tracking.conftest import next_attempt, token_client
from tracking.models import Run
from tracking.points import stored_points
from tracking.selectors import attempt_starts, full_series
from tracking.tokens import run_token

pytestmark = pytest.mark.django_db


def url(run) -> str:
    return reverse("run-log-batch", kwargs={"pk": run.pk})


def points(n: int, key: str = "loss", start: int = 0) -> list[dict]:
    return [{"key": key, "value": 1.0 / (i + 1), "step": start + i, "timestamp": 1_700_000_000_000 + i}
            for i in range(n)]


def test_a_batch_of_ten_thousand_points_with_params_and_tags_is_written(run, run_client):
    response = run_client.post(url(run), {"metrics": points(10_000), "params": {"batch_size": 32},
                                          "tags": [{"key": "git", "value": "abc123"}]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {"points": 10_000}
    run.refresh_from_db()
    assert len(stored_points(run.pk)) == 10_000
    assert run.params == {"lr": "0.0003", "batch_size": "32"}
    assert run.tags["git"] == "abc123"
    assert run.summary["loss"] == {"last": 1.0 / 10_000, "step": 9_999, "min": 1.0 / 10_000, "max": 1.0}


def test_one_point_over_the_limit_is_refused_and_nothing_is_written(run, run_client):
    response = run_client.post(url(run), {"metrics": points(10_001)}, format="json")
    assert response.status_code == 400
    assert "metrics" in response.json()["error"]["fields"]
    assert not stored_points(run.pk)


@pytest.mark.parametrize(("bad", "field"), [
    ({"key": "loss", "value": "high", "step": 1}, "metrics[2].value"),
    ({"key": "loss", "value": True, "step": 1}, "metrics[2].value"),
    ({"key": "loss", "value": 1.0, "step": -1}, "metrics[2].step"),
    ({"key": "loss", "value": 1.0, "step": 1.5}, "metrics[2].step"),
    ({"key": "x" * 251, "value": 1.0, "step": 1}, "metrics[2].key"),
    ({"key": "lo\nss", "value": 1.0, "step": 1}, "metrics[2].key"),
    ({"key": "loss", "step": 1}, "metrics[2].value"),
    ({"key": "loss", "value": 1.0, "step": 1, "colour": "red"}, "metrics[2].colour"),
    ({"key": "loss", "value": 10**400, "step": 1}, "metrics[2].value"),
])
def test_a_bad_point_names_its_index_and_the_batch_writes_nothing(run, run_client, bad, field):
    body = {"metrics": [*points(2), bad, *points(2, start=10)], "params": {"new": "1"}}
    response = run_client.post(url(run), body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    run.refresh_from_db()
    assert not stored_points(run.pk)
    assert "new" not in run.params


def test_nan_and_infinities_are_stored_and_read_back_as_such(run, run_client):
    body = {"metrics": [{"key": "loss", "value": v, "step": i} for i, v in
                        enumerate([1.0, "NaN", "Infinity", "-Infinity", 0.5])]}
    assert run_client.post(url(run), body, format="json").status_code == 200
    values = [v for _, v in full_series(run, "loss")]
    assert values[0] == 1.0 and math.isnan(values[1]) and values[2:4] == [math.inf, -math.inf] and values[4] == 0.5
    run.refresh_from_db()
    assert run.summary["loss"]["min"] == 0.5 and run.summary["loss"]["max"] == 1.0  # extremes of finite values


def test_a_retried_batch_changes_nothing(run, run_client):
    body = {"metrics": points(100), "params": {"seed": "1"}}
    for _ in range(2):
        assert run_client.post(url(run), body, format="json").status_code == 200
    assert len(stored_points(run.pk)) == 100


def test_a_param_cannot_change_and_the_batch_carrying_it_writes_nothing(run, run_client):
    response = run_client.post(url(run), {"metrics": points(5), "params": {"lr": "0.1"}}, format="json")
    assert response.status_code == 400
    assert "params.lr" in response.json()["error"]["fields"]
    assert not stored_points(run.pk)


def test_a_finished_run_takes_no_more_points(run, run_client):
    Run.objects.filter(pk=run.pk).update(status="FINISHED")
    response = run_client.post(url(run), {"metrics": points(1)}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "run_finished"


def test_a_run_token_writes_only_its_own_run(run, other_run, run_client):
    client = run_client
    assert client.post(url(other_run), {"metrics": points(1)}, format="json").status_code == 403
    assert not stored_points(other_run.pk)
    # ... and reads nothing through the user API
    assert client.get(reverse("run-list")).status_code in (401, 403)
    assert client.get(reverse("run-detail", kwargs={"pk": run.pk})).status_code in (401, 403)


def test_a_forged_or_foreign_token_is_refused(run):
    from rest_framework.test import APIClient

    client = APIClient()
    forged = run_token(run.pk, 1)[:-4] + "0000"
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {forged}")
    assert client.post(url(run), {"metrics": points(1)}, format="json").status_code == 401


def test_users_log_by_role_and_an_outsider_sees_no_run(run, tenant):
    assert client_for(tenant.users["member"]).post(url(run), {"metrics": points(1)}, format="json").status_code == 200
    assert client_for(tenant.users["viewer"]).post(url(run), {"metrics": points(1, start=5)},
                                                   format="json").status_code == 403
    assert client_for(tenant.users["outsider"]).post(url(run), {"metrics": points(1, start=9)},
                                                     format="json").status_code == 404
    assert len(stored_points(run.pk)) == 1


def test_a_warm_writer_is_not_asked_its_membership_again_and_losing_it_applies_at_once(run, tenant):
    # The writer's role comes from the per-process membership cache (tenancy/authcache.py), as the MLflow
    # endpoint's does: a second batch reads no membership, and a removal or a lower role applies to the next one.
    member = tenant.users["member"]
    client = client_for(member)
    assert client.post(url(run), {"metrics": points(1)}, format="json").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert client.post(url(run), {"metrics": points(1, start=1)}, format="json").status_code == 200
    assert not [q["sql"] for q in queries.captured_queries if "tenancy_membership" in q["sql"]]
    membership = Membership.objects.get(user=member, project=tenant.project)
    membership_change_role(actor=tenant.users["owner"], membership=membership, role="viewer")
    assert client.post(url(run), {"metrics": points(1, start=2)}, format="json").status_code == 403
    membership_remove(actor=tenant.users["owner"], membership=Membership.objects.get(pk=membership.pk))
    assert client.post(url(run), {"metrics": points(1, start=3)}, format="json").status_code == 404
    assert len(stored_points(run.pk)) == 2


def test_a_bad_batch_to_a_run_the_user_may_not_write_is_refused_for_the_run_not_for_the_batch(run, tenant):
    # The access check reads the run where the batch is written (under its lock): a batch refused for its contents
    # is refused only after it, so the answer tells an outsider nothing about another tenant's run.
    bad = {"metrics": [{"key": "loss", "value": "a lot", "step": 1}]}
    assert client_for(tenant.users["outsider"]).post(url(run), bad, format="json").status_code == 404
    missing = run.pk + 1000
    assert client_for(tenant.users["member"]).post(f"/api/v1/runs/{missing}/log-batch/", bad,
                                                   format="json").status_code == 404
    assert client_for(tenant.users["viewer"]).post(url(run), bad, format="json").status_code == 403
    refused = client_for(tenant.users["member"]).post(url(run), bad, format="json")
    assert refused.status_code == 400 and "metrics[0].value" in refused.json()["error"]["fields"]
    assert not stored_points(run.pk)


def test_points_carry_the_attempt_and_a_resumed_attempt_overrides_the_redone_steps(run, job_of_run, run_client):
    run_client.post(url(run), {"metrics": points(10)}, format="json")
    assert next_attempt(job_of_run) == 2
    redo = [{"key": "loss", "value": 9.0, "step": s} for s in range(5, 12)]
    token_client(run_token(run.pk, 2)).post(url(run), {"metrics": redo}, format="json")
    series = dict(full_series(run, "loss"))
    assert series[4] == pytest.approx(1 / 5) and series[5] == 9.0 and series[11] == 9.0
    assert sum(p.attempt == 2 for p in stored_points(run.pk)) == 7
    run.refresh_from_db()
    assert [(a["attempt"], a["step"]) for a in attempt_starts(run)] == [(1, 0), (2, 5)]


@pytest.mark.parametrize("attempt", [0, 32_768, True, "2"])
def test_an_attempt_out_of_range_is_a_400_and_writes_nothing(run, run_client, attempt):
    response = run_client.post(url(run), {"metrics": points(3), "attempt": attempt}, format="json")
    assert response.status_code == 400, response.content
    assert "attempt" in response.json()["error"]["fields"]
    assert not stored_points(run.pk)


def test_the_same_step_twice_in_one_batch_keeps_the_later_value(run, run_client):
    body = {"metrics": [{"key": "loss", "value": 1.0, "step": 7}, {"key": "loss", "value": 2.0, "step": 7}]}
    assert run_client.post(url(run), body, format="json").status_code == 200
    assert full_series(run, "loss") == [(7, 2.0)]
