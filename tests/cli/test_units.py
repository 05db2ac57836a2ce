"""The CLI's pure helpers: time and usage formatting, job file parsing, error wording. No server needed."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from tidal_cli import jobfile
from tidal_cli.client import CliError, error_from_response
from tidal_cli.humanize import duration, estimate, eta, relative, usage_bar
from tidal_cli.output import table

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
SDK = Path(__file__).resolve().parents[2] / "sdk" / "tidal_cli"


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (42, "42s"), (60, "1m"), (61, "1m 1s"), (3900, "1h 5m"), (7200, "2h"), (90061, "1d 1h"), (None, "-"),
])
def test_duration(seconds, text):
    assert duration(seconds) == text


def test_relative_and_eta():
    assert relative("2025-01-01T13:20:00Z", NOW) == "in 1h 20m"
    assert relative("2025-01-01T11:57:00+00:00", NOW) == "3m ago"
    assert relative(None, NOW) == "-"
    assert eta(None, NOW) == "unknown"
    assert eta("2025-01-01T11:00:00Z", NOW) == "any moment"
    assert eta("2025-01-02T12:00:00Z", NOW) == "in 1d"


@pytest.mark.parametrize(("waiting", "text"), [
    ({"eta": "2025-01-01T12:25:00Z", "eta_low": "2025-01-01T12:10:00Z", "eta_high": "2025-01-01T13:10:00Z",
      "eta_note": ""}, "in 25m (range 10m-1h 10m)"),
    ({"eta": "2025-01-01T12:25:00Z", "eta_low": "2025-01-01T11:59:00Z", "eta_high": None, "eta_note": ""},
     "in 25m (range now or later)"),
    ({"eta": "2025-01-01T15:00:00Z", "eta_low": "2025-01-01T15:00:00Z", "eta_high": None,
      "eta_note": "no earlier than"}, "no earlier than 3h from now"),
    ({"eta": None, "eta_low": None, "eta_high": None, "eta_note": "no runtime known"}, "no runtime known"),
    ({"eta": None, "eta_note": ""}, "unknown"),
    ({"eta": "2025-01-01T12:25:00Z"}, "in 25m"),  # a server from before ranges
    (None, "unknown"),
])
def test_estimate(waiting, text):
    assert estimate(waiting, NOW) == text


@pytest.mark.parametrize(("args", "bar"), [
    ((16, 16, 8, 0, 0), "[#####.....|          ]"),  # half the guarantee used
    ((16, 16, 24, 8, 0), "[##########|+++++     ]"),  # guarantee full, borrowing 8 of 16
    ((16, 0, 4, 0, 8), "[#####~~~~~~~~~~.....]"),  # lending 8 of the idle guarantee
    ((0, 8, 4, 4, 0), "[++++++++++          ]"),  # no guarantee, borrowing only
    ((16, 0, 32, 0, 0), "[##########|++++++++++]"),  # quota lowered below use: the excess shows
])
def test_usage_bar(args, bar):
    assert usage_bar(*args) == bar


def test_table_formats_none_bools_and_formatters():
    rows = [{"a": None, "b": True, "c": 3}, {"a": "x", "b": False, "c": 10}]
    assert table(rows, [("a", "A"), ("b", "B"), ("c", "C", lambda v: f"{v}s")]).splitlines() == [
        "A  B    C", "-  yes  3s", "x  no   10s"]
    assert table([], [("a", "A")], empty="nothing") == "nothing"


def test_job_file_locates_fields(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: x\ngroups:\n  - role: a\n    flavor: f\n  - role: b\n    flavor: g\nenv:\n  A: b\n")
    job = jobfile.load(str(path))
    assert job.line_of("groups.1.flavor") == 6
    assert job.line_of("groups[0].flavor") == 4
    assert job.line_of("groups.1.devices") == 5  # missing: its closest parent
    assert job.line_of("env") == 7
    assert job.line_of("nothing") is None


def test_job_file_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n  image: y\n")
    with pytest.raises(CliError, match=r"bad.yaml line 2, column 8: invalid YAML"):
        jobfile.load(str(bad))
    with pytest.raises(CliError, match="is a directory"):
        jobfile.load(str(tmp_path))


def _response(status: int, body=None, text: str = "") -> httpx.Response:
    request = httpx.Request("GET", "http://tidal.test/api/v1/jobs/")
    return httpx.Response(status, json=body, request=request) if body is not None else \
        httpx.Response(status, text=text, request=request)


def test_error_wording():
    body = {"error": {"code": "invalid", "message": "name: Required.", "fields": {"name": ["Required."],
                                                                                     "image": ["Required."]}}}
    assert str(error_from_response(_response(400, body))) == "name: Required. (image: Required.)"
    domain = {"error": {"code": "never_fits", "message": "Too big.", "fields": {"groups": ["Too big."]}}}
    assert str(error_from_response(_response(400, domain))) == "Too big. (field groups)"
    html = error_from_response(_response(502, text="<html>Bad Gateway</html>\n<body/>"))
    assert str(html) == ("HTTP 502 Bad Gateway from http://tidal.test/api/v1/jobs/ (the server or a proxy is "
                         "unavailable)")
    assert html.status == 502
    missing = error_from_response(_response(404, text="<!DOCTYPE html>"))
    assert "HTTP 404 Not Found" in str(missing) and "is the server URL right?" in str(missing)


def test_cli_does_not_import_django():
    for module in SDK.rglob("*.py"):
        tree = ast.parse(module.read_text())
        names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not {n for n in names if n.split(".")[0] in {"django", "rest_framework"}}, module
