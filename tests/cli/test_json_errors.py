"""With --json every error is one JSON object on stderr, `{"error": {"code", "message", "fields", "status"}}`, and
the exit status is non-zero; stdout stays empty, so `tidal jobs --json > jobs.json` never leaves an error where a
script expects the list."""

from __future__ import annotations

import json

import pytest
from tidal_cli.main import main

from tests.cli.conftest import Result

pytestmark = pytest.mark.django_db(transaction=True)


def json_error(result: Result, code: int = 1) -> dict:
    assert result.code == code, result
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err  # one line: easy to log, easy to parse
    body = json.loads(lines[0])
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "fields", "status"}
    return body["error"]


def test_an_api_error_keeps_the_servers_code_and_fields(cli):
    error = json_error(cli("jobs", "--flavor", "bogus", "--json"))
    assert error["code"] == "invalid" and error["status"] == 400
    assert error["fields"] == {"flavor": ["No flavor named 'bogus'."]}
    assert error["message"].startswith("flavor: No flavor named 'bogus'.")


def test_another_tenants_job_is_not_found_in_json_too(cli, job_file):
    job = cli("submit", str(job_file()), "--project", "vision", "--json").json()
    for command in ("job", "cancel", "resubmit", "logs"):
        error = json_error(cli(command, str(job["id"]), "--json", user="outsider"))
        assert error == {"code": "not_found", "status": 404, "fields": {}, "message": (
            f"Job {job['id']} not found: it does not exist or is not in one of your projects.")}


def test_a_permission_error(cli, job_file):
    error = json_error(cli("submit", str(job_file()), "--project", "vision", "--json", user="viewer"))
    assert error["code"] == "permission_denied" and error["status"] == 403
    assert error["message"] == "This needs the member role in project vision."


def test_a_rejected_job_file_names_the_field_and_line(cli, job_file):
    path = job_file(flavor="tpu-v5")
    error = json_error(cli("submit", str(path), "--project", "vision", "--json"))
    assert error["status"] == 400 and error["code"] == "invalid"
    assert list(error["fields"]) == ["groups[0].flavor"] and "tpu-v5" in error["fields"]["groups[0].flavor"][0]
    assert error["message"].startswith(f"{path} line 8: groups[0].flavor: ")


def test_a_broken_job_file_is_refused_before_sending(cli, job_file):
    path = job_file("name: broken\ncommand: [python\n")
    error = json_error(cli("submit", str(path), "--project", "vision", "--json"))
    assert error["code"] == "bad_job_file" and error["status"] is None and "invalid YAML" in error["message"]


def test_a_rejected_token(cli):
    error = json_error(cli("whoami", "--json", token="tdl_not-a-real-token"))
    assert error["status"] == 401 and "rejected your token" in error["message"]


def test_not_logged_in(monkeypatch, tmp_path, capsys):
    for name in ("TIDAL_URL", "TIDAL_TOKEN", "TIDAL_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TIDAL_CONFIG", str(tmp_path / "config.json"))
    code = main(["quota", "--json"])
    captured = capsys.readouterr()
    error = json_error(Result(code, captured.out, captured.err))
    assert error["code"] == "not_logged_in" and "tidal login" in error["message"]


# Every command that talks to the server, against a port nobody listens on.
OFFLINE = [("login", "--token", "tdl_x"), ("whoami",), ("projects",), ("submit", "{job}", "--project", "vision"),
           ("jobs",), ("job", "1"), ("cancel", "1"), ("resubmit", "1"), ("queue",), ("quota",), ("flavors",),
           ("priority-classes",), ("replay", "--id", "1"), ("logs", "1"), ("logs", "1", "--follow")]


@pytest.mark.parametrize("argv", OFFLINE, ids=[" ".join(a) for a in OFFLINE])
def test_every_command_reports_an_unreachable_server_as_json(cli, closed_port, job_file, argv):
    url = f"http://127.0.0.1:{closed_port}"
    argv = [a.replace("{job}", str(job_file())) for a in argv]
    if argv[0] == "login":
        argv += ["--url", url]
    error = json_error(cli(*argv, "--json", url=url))
    assert error["code"] == "unreachable" and error["status"] is None
    assert error["message"].startswith(f"Cannot connect to Tidal at {url}")


@pytest.mark.parametrize(("argv", "fields"), [
    (("jobs", "--limit", "0"), {"--limit": ["not a positive number: '0'"]}),
    (("job", "abc"), {"id": ["not a job id: 'abc' (a positive number, e.g. 42)"]}),
    (("jobs", "--state", "sleeping"), {"--state": [
        "unknown state 'sleeping' (one of queued, admitted, dispatching, running, succeeded, failed, cancelled, "
        "preempted, retrying)"]}),
    (("cancel",), {"id": ["required"]}),
    (("jobs", "--bogus"), {}),
])
def test_a_usage_error_is_json_and_exits_2(cli, argv, fields):
    error = json_error(cli(*argv, "--json"), code=2)
    assert error["code"] == "usage" and error["status"] is None and error["fields"] == fields
    assert error["message"]


def test_a_usage_error_found_by_a_command_is_json_and_exits_2(cli):
    error = json_error(cli("replay", "--json"), code=2)
    assert error["code"] == "usage" and "exactly one of" in error["message"]
    assert json_error(cli("login", "--json"), code=2)["code"] == "usage"


def test_without_json_errors_stay_one_readable_line(cli):
    result = cli("jobs", "--flavor", "bogus")
    assert result.code == 1 and result.err.startswith("tidal: flavor: No flavor named 'bogus'.")
    usage = cli("jobs", "--limit", "0")
    assert usage.code == 2 and usage.err.startswith("usage: tidal jobs")
    assert "tidal jobs: error: argument --limit: not a positive number: '0'" in usage.err


def test_a_failed_replay_prints_the_run_and_still_exits_1(cli, settings, tmp_path, monkeypatch):
    """The run is the answer (stdout), its failure the error (stderr): the exit status is the one of text mode."""
    from replays import runs
    from tenancy.services import token_create
    from tests.conftest import make_user
    from tests.replays.conftest import trace_text

    def explode(*args, **kwargs):
        raise RuntimeError("core exploded")

    settings.REPLAY_DIR = tmp_path / "replays"
    monkeypatch.setattr(runs, "run", explode)
    trace = tmp_path / "week.csv"
    trace.write_text(trace_text())
    staff = token_create(user=make_user("platform-admin", is_staff=True), name="cli")[1]
    result = cli("replay", "--trace", str(trace), "--wait", "--interval", "0.05", "--json", token=staff)
    assert result.code == 1
    assert json.loads(result.out)["status"] == "failed"
    error = json.loads(result.err)["error"]
    assert error["code"] == "replay_failed" and "core exploded" in error["message"]
