"""Numbers written with digits Python's `str.isdigit()` accepts and `int()` refuses ("²", a superscript; found by
`make fuzz` exploring: `GET /api/v1/flavors/²/` answered 500). Every place that reads a whole number from a request,
a header, a cursor or the command line reads ASCII digits (`core.digits`, the SDK's `tidal_cli.digits`): such a value
is refused or ignored as any other non-number is, never a server error or a traceback."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from tidal_cli.commands.tracking import experiment_id
from tidal_cli.digits import is_digits as sdk_is_digits

from core.digits import is_digits
from tests.jobs.conftest import inventory  # noqa: F401  (fixture)
from tests.tracking.conftest import job_of_run, run  # noqa: F401  (fixtures)
from tests.tracking.test_mlflow import user_token

SUPERSCRIPT_TWO = "\u00b2"  # isdigit() and not int()


@pytest.mark.parametrize("check", [is_digits, sdk_is_digits])
@pytest.mark.parametrize(("text", "digits"), [("42", True), ("0", True), ("", False), ("-1", False), ("4 2", False),
                                              (SUPERSCRIPT_TWO, False), ("\u0663", False), ("\uff14\uff12", False)])
def test_only_ascii_digits_are_a_whole_number(check, text, digits):
    assert check(text) is digits


def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_object_named_by_a_superscript_is_not_found(tenant, clients):
    for role in ("owner", "outsider"):
        response = clients[role].get(f"/api/v1/flavors/{SUPERSCRIPT_TWO}/")
        assert response.status_code == 404, response.content[:300]


def test_a_superscript_in_a_log_cursor_is_refused_naming_it(tenant, job_of_run):  # noqa: F811
    response = page_client(tenant.users["member"]).get(f"/api/v1/jobs/{job_of_run.pk}/logs/",
                                                        {"cursor": f"{SUPERSCRIPT_TWO}:1", "follow": "true"})
    assert response.status_code == 400, response.content[:300]
    assert "cursor" in response.json()["error"]["fields"]


def test_pages_read_a_superscript_as_no_number(tenant, job_of_run, run):  # noqa: F811
    member = page_client(tenant.users["member"])
    assert member.get(reverse("job_logs", args=[job_of_run.pk]), {"attempt": SUPERSCRIPT_TWO}).status_code == 200
    assert member.get(reverse("job_new"), {"from": SUPERSCRIPT_TWO}).status_code == 200
    assert member.get(reverse("reliability"), {"days": SUPERSCRIPT_TWO}).status_code == 200
    assert member.get(reverse("run_compare"), {"run": [str(run.pk), SUPERSCRIPT_TWO]}).status_code == 404
    scaled = member.post(reverse("job_scale", args=[job_of_run.pk]), {"max": SUPERSCRIPT_TWO}, follow=True)
    assert scaled.status_code == 200 and "a whole number of workers" in scaled.content.decode()


def test_a_superscript_artifact_length_is_refused(tenant, run):  # noqa: F811
    response = Client().put(
        f"/mlflow/vision/api/2.0/mlflow-artifacts/artifacts/{run.experiment_id}/{run.pk}/artifacts/a.txt", b"x",
        content_type="application/octet-stream", CONTENT_LENGTH=SUPERSCRIPT_TWO,
        HTTP_AUTHORIZATION=f"Bearer {user_token(tenant.users['member'])}")
    assert response.status_code == 400, response.content[:300]
    assert "Content-Length" in response.json()["message"]


def test_the_cli_takes_an_experiment_named_by_a_superscript_as_a_name(monkeypatch):
    import tidal_cli.commands.tracking as tracking_commands

    monkeypatch.setattr(tracking_commands, "list_rows", lambda path, **query: [{"name": SUPERSCRIPT_TWO, "id": 9}])
    assert experiment_id(SUPERSCRIPT_TWO, None) == 9
