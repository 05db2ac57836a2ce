"""Every failure ends with a non-zero exit and one line on stderr that says what to do."""

from __future__ import annotations

import re

import pytest
from tidal_cli.main import build_parser, main

pytestmark = pytest.mark.django_db(transaction=True)

COMMANDS = ["login", "whoami", "projects", "submit", "jobs", "job", "cancel", "resubmit", "scale", "queue", "quota",
            "flavors", "priority-classes", "pools", "pool", "services", "service", "replay", "logs", "runs", "run",
            "metrics", "alerts", "costs", "budget", "reliability"]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tidal: ")
    return lines[0]


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    registered = build_parser()._subparsers._group_actions[0].choices
    assert sorted(registered) == sorted(COMMANDS)
    for name in COMMANDS:
        assert f"    {name}" in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_json(command, capsys):
    assert main([command, "--help"]) == 0
    assert "--json" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys):
    assert main([]) == 2
    assert main(["job", "abc"]) == 2
    assert "not a job id: 'abc'" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2


def test_invalid_yaml_names_the_line(cli, job_file):
    path = job_file("name: broken\nimage: x\ncommand: [python\ngroups: []\n")
    result = cli("submit", str(path), "--project", "vision")
    assert result.code == 1
    line = one_line(result.err)
    assert f"{path} line 4" in line and "invalid YAML" in line


def test_not_a_mapping_and_missing_file(cli, job_file, tmp_path):
    result = cli("submit", str(job_file("- just\n- a list\n")), "--project", "vision")
    assert result.code == 1 and "a job file is a mapping" in one_line(result.err)
    missing = cli("submit", str(tmp_path / "nope.yaml"))
    assert missing.code == 1 and one_line(missing.err) == f"tidal: {tmp_path / 'nope.yaml'}: no such file"
    empty = cli("submit", str(job_file("")))
    assert empty.code == 1 and "the file is empty" in one_line(empty.err)


def test_unknown_flavor_names_the_field_and_line(cli, job_file):
    path = job_file(flavor="tpu-v5")
    result = cli("submit", str(path), "--project", "vision")
    assert result.code == 1
    line = one_line(result.err)
    # The server names nested fields groups[0].flavor (older versions: groups.0.flavor); either is found in the file.
    assert re.search(rf"{re.escape(str(path))} line 8: groups(\[0\]|\.0)\.flavor: ", line)
    assert "tpu-v5" in line and "tidal flavors" in line


def test_several_bad_fields_are_all_named(cli, job_file):
    path = job_file(replicas=0, extra="env:\n  1BAD: x\n")
    line = one_line(cli("submit", str(path), "--project", "vision").err)
    assert re.search(r"groups(\[0\]|\.0)\.replicas", line) and "env" in line


def test_job_that_can_never_run_names_the_field(cli, job_file):
    line = one_line(cli("submit", str(job_file(replicas=9)), "--project", "vision").err)  # 72 > 16 + 16 H100
    assert "can never run" in line and "field groups" in line


def test_viewer_cannot_submit(cli, job_file):
    result = cli("submit", str(job_file()), "--project", "vision", user="viewer")
    assert result.code == 1
    assert one_line(result.err) == "tidal: This needs the member role in project vision."


def test_member_cannot_cancel_someone_elses_job(cli, job_file):
    job = cli("submit", str(job_file()), "--project", "vision", "--json", user="admin").json()
    result = cli("cancel", str(job["id"]))
    assert result.code == 1 and "only manage their own jobs" in one_line(result.err)


def test_another_tenants_job_is_not_found(cli, job_file):
    job = cli("submit", str(job_file()), "--project", "vision", "--json").json()
    for command in ("job", "cancel", "resubmit"):
        result = cli(command, str(job["id"]), user="outsider")
        assert result.code == 1
        assert one_line(result.err) == (f"tidal: Job {job['id']} not found: it does not exist or is not in one of "
                                        "your projects.")
    assert cli("jobs", "--all", "--json", user="outsider").json() == []
    assert cli("queue", "--json", user="outsider").json() == []
    assert cli("job", "999999").code == 1


def test_wrong_token_says_to_log_in_again(cli):
    result = cli("jobs", token="tdl_not-a-real-token")
    assert result.code == 1
    line = one_line(result.err)
    assert "rejected your token" in line and "tidal login" in line


def test_unreachable_server_names_the_url(cli, closed_port):
    url = f"http://127.0.0.1:{closed_port}"
    result = cli("jobs", url=url)
    assert result.code == 1
    line = one_line(result.err)
    assert f"Cannot connect to Tidal at {url}" in line


def test_not_logged_in(monkeypatch, tmp_path, capsys):
    for name in ("TIDAL_URL", "TIDAL_TOKEN", "TIDAL_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TIDAL_CONFIG", str(tmp_path / "config.json"))
    assert main(["jobs"]) == 1
    assert "Not logged in" in one_line(capsys.readouterr().err)


def test_login_stores_the_config_and_later_commands_use_it(cli, live_server, tokens, monkeypatch, tmp_path):
    result = cli("login", "--url", live_server.url, "--token", tokens["member"], "--project", "vision")
    assert result.code == 0 and "as member" in result.out
    config = tmp_path / "tidal" / "config.json"
    assert config.exists() and oct(config.stat().st_mode & 0o777) == "0o600"
    monkeypatch.delenv("TIDAL_URL")
    monkeypatch.delenv("TIDAL_TOKEN")
    assert main(["whoami"]) == 0
    bad = cli("login", "--url", live_server.url, "--token", "tdl_wrong")
    assert bad.code == 1 and "rejected your token" in bad.err


def test_a_read_only_token_logs_in_reads_and_says_why_a_write_is_refused(cli, live_server, tenant, job_file):
    from tenancy.services import token_create

    secret = token_create(user=tenant.users["owner"], name="dashboard", read_only=True)[1]
    result = cli("login", "--url", live_server.url, "--token", secret)
    assert result.code == 0 and "as owner with a read-only token" in result.out
    assert cli("login", "--url", live_server.url, "--token", secret, "--json").json()["read_only"] is True
    assert cli("jobs", token=secret).code == 0
    refused = cli("submit", str(job_file()), "--project", "vision", token=secret)
    assert refused.code == 1
    assert one_line(refused.err) == ("tidal: This token is read-only. Log in with a token that can write: "
                                     "tidal login --token TOKEN")


@pytest.mark.parametrize(("argv", "reason"), [
    (("jobs", "--flavor", "bogus"), "flavor: No flavor named 'bogus'. (`tidal flavors` lists them)"),
    (("jobs", "--project", "nope", "--all"), "project: No project named 'nope'. (`tidal projects` lists yours)"),
    (("queue", "--flavor", "bogus"), "flavor: No flavor named 'bogus'. (`tidal flavors` lists them)"),
    (("queue", "--project", "nope"), "project: No project named 'nope'. (`tidal projects` lists yours)"),
    (("quota", "--project", "nope"), "project: No project named 'nope'. (`tidal projects` lists yours)"),
    (("quota", "--flavor", "bogus"), "flavor: No flavor named 'bogus'. (`tidal flavors` lists them)"),
])
def test_an_unknown_name_is_an_error_naming_it(cli, argv, reason):
    """It used to exit 0 with an empty table, which reads as "nothing there" when the name was a typo."""
    result = cli(*argv)
    assert result.code == 1 and result.out == ""
    assert one_line(result.err) == f"tidal: {reason}"


@pytest.mark.parametrize("command", ["jobs", "queue", "quota"])
def test_another_tenants_project_reads_like_a_missing_one(cli, command):
    theirs = cli(command, "--project", "secret")
    missing = cli(command, "--project", "no-such-project")
    assert theirs.code == missing.code == 1
    assert theirs.err == missing.err.replace("no-such-project", "secret")
    assert cli(command, "--project", "secret", user="outsider").code == 0  # it exists, for its own members


def test_a_known_name_still_lists(cli):
    assert cli("quota", "--project", "vision", "--flavor", "nvidia-h100-80gb").code == 0
    assert cli("jobs", "--flavor", "ascend-910b").out.strip().startswith("No jobs")
