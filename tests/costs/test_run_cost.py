"""What a run cost, on its page, the experiment's runs table and the API: so far, and to first reach a metric value
(the money spent until eval loss first went below 2.0), so a sweep's runs compare by cost."""

from __future__ import annotations

import pytest
from django.test import Client

from jobs.lifecycle import transition
from jobs.states import State
from tests.conftest import client_for
from tests.costs.conftest import at
from tests.jobs.conftest import run as run_job
from tests.jobs.conftest import submit
from tracking import services
from tracking.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(tenant, prices):
    """A job of 8 h100 at 2.00 for 10 h whose loss goes 3.0, 2.7, ... (first below 2.0 at step 4, hour 4)."""
    job = run_job(submit(tenant, prices["h100"], experiment="sweep"), prices["cluster"], ["r1-n1"], now=at(0))
    run = Run.objects.get(job=job)
    services.run_log_batch(run_id=run.pk, metrics=[
        {"key": "loss", "value": round(3.0 - 0.3 * i, 2), "step": i, "timestamp": int(at(i).timestamp() * 1000)}
        for i in range(10)])
    transition(job, State.CANCELLED, reason="stop", actor="member", now=at(10))
    return run


def test_the_api_answers_the_cost_so_far_and_the_cost_to_reach_a_value(tenant, run):
    api = client_for(tenant.users["viewer"])
    assert api.get(f"/api/v1/runs/{run.pk}/cost/").json() == {
        "currency": "USD", "cost": pytest.approx(160.0), "target": None, "reached": None}
    body = api.get(f"/api/v1/runs/{run.pk}/cost/", {"key": "loss", "below": "2.0"}).json()
    assert body["target"] == "loss < 2" and body["reached"]["step"] == 4
    assert body["reached"]["cost"] == pytest.approx(64.0)
    never = api.get(f"/api/v1/runs/{run.pk}/cost/", {"key": "loss", "below": "0.1"}).json()
    assert never["reached"] is None and never["cost"] == pytest.approx(160.0)
    above = api.get(f"/api/v1/runs/{run.pk}/cost/", {"key": "loss", "above": "2.9"}).json()
    assert above["reached"]["step"] == 0 and above["reached"]["cost"] == pytest.approx(0.0)


@pytest.mark.parametrize(("params", "field"), [({"key": "loss"}, "below"), ({"below": "2"}, "key"),
                                               ({"key": "loss", "below": "x"}, "below"),
                                               ({"key": "loss", "below": "1", "above": "2"}, "below"),
                                               ({"key": "loss", "above": "nan"}, "above")])
def test_a_bad_target_is_a_400_naming_the_field(tenant, run, params, field):
    response = client_for(tenant.users["viewer"]).get(f"/api/v1/runs/{run.pk}/cost/", params)
    assert response.status_code == 400 and field in response.json()["error"]["fields"]


def test_another_tenants_run_cost_is_a_404(tenant, run):
    assert client_for(tenant.users["outsider"]).get(f"/api/v1/runs/{run.pk}/cost/").status_code == 404


def test_a_run_without_a_job_has_no_metered_cost(tenant, prices):
    lone = services.run_create(project=tenant.project, name="laptop", user=tenant.users["member"])
    body = client_for(tenant.users["member"]).get(f"/api/v1/runs/{lone.pk}/cost/").json()
    assert body["cost"] is None and body["reached"] is None


def page(tenant, url, **params):
    browser = Client()
    browser.force_login(tenant.users["viewer"])
    response = browser.get(url, params)
    assert response.status_code == 200
    return response.content.decode()


def test_the_run_page_shows_the_cost_and_the_cost_to_reach(tenant, run):
    html = page(tenant, f"/runs/{run.pk}/", reach_key="loss", reach_dir="below", reach_value="2")
    assert "160.00 USD" in html and "loss &lt; 2 first at step 4" in html and "having cost 64.00 USD" in html
    bad = page(tenant, f"/runs/{run.pk}/", reach_key="loss", reach_dir="below", reach_value="abc")
    assert 'id="reach-error">below: Must be a number.' in bad


def test_the_experiment_page_compares_runs_by_cost_to_reach(tenant, run):
    html = page(tenant, f"/experiments/{run.experiment_id}/", reach_key="loss", reach_dir="below", reach_value="2")
    assert 'id="reach-header">Cost to loss &lt; 2' in html
    assert '<td class="num cost">160.00</td>' in html and "64.00" in html
