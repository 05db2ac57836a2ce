"""`tidal replay` against a live server: upload, follow progress with an ETA, print the summary table."""

from __future__ import annotations

import pytest

from tenancy.services import token_create
from tests.cli.conftest import cli, demo_cluster, tokens  # noqa: F401  (the CLI fixtures, reused)
from tests.conftest import make_user
from tests.replays.conftest import trace_text

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def staff_token(tenant) -> str:
    return token_create(user=make_user("platform-admin", is_staff=True), name="cli")[1]


def test_replay_uploads_waits_and_prints_the_table(cli, staff_token, tmp_path):  # noqa: F811
    trace = tmp_path / "week.csv"
    trace.write_text(trace_text())
    result = cli("replay", "--trace", str(trace), "--policy", "production", "--compare", "strict-fifo", "--wait",
                 token=staff_token)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split()[:4] == ["POLICY", "JOBS", "WAIT", "MEAN"]
    assert lines[1].split()[:2] == ["production", "12"] and lines[2].split()[:2] == ["strict-fifo", "12"]
    assert "production: per project" in result.out and "strict-fifo vs production" in result.out
    assert "VERDICT" in result.out and "report: http" in result.out
    assert "100%" in result.err and "succeeded" in result.err and "done" in result.err
    run_id = result.err.split("replay ")[1].split()[0]
    shown = cli("replay", "--id", run_id, "--json", token=staff_token)
    assert shown.code == 0 and shown.json()["status"] == "succeeded"


def test_replay_errors_are_one_line(cli, staff_token, tmp_path):  # noqa: F811
    bad = tmp_path / "bad.csv"
    bad.write_text(trace_text(n=2, extra="x,0,10,8,1,nvidia-h100-80gb,vision,urgent,,\n"))
    result = cli("replay", "--trace", str(bad), token=staff_token)
    assert result.code == 1
    assert "bad.csv line 4: priority 'urgent'" in result.err and "[unknown_priority]" in result.err
    denied = cli("replay", "--trace", str(bad), user="owner")
    assert denied.code == 1 and "platform admins" in denied.err
    assert cli("replay", "--trace", str(tmp_path / "missing.csv"), token=staff_token).err.startswith(
        "tidal: trace file")
    assert "exactly one of" in cli("replay", token=staff_token).err
