"""`manage.py replay` on a small trace with `current` and file inputs, and `manage.py export_trace`."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tests.replays.conftest import trace_text


def replay(*argv: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("replay", *argv, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_replay_with_current_cluster_and_quotas(inventory, trace_file, tmp_path):
    out_dir = tmp_path / "out"
    out, err = replay("--trace", str(trace_file), "--cluster", "current", "--quotas", "current", "--policy",
                      "production", "--compare", "strict-fifo", "--out", str(out_dir))
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["policy", "jobs", "wait"]
    assert any(line.startswith("production ") and " 12 " in line for line in lines)
    assert any(line.startswith("strict-fifo ") for line in lines)
    assert "production: project" in out and "vision" in out and "speech" in out
    assert "strict-fifo vs production" in out
    assert "100%" in err and "12/12 jobs" in err and "done" in err  # the progress bar with its ETA
    assert (out_dir / "report.html").exists() and (out_dir / "summary.json").exists()


def test_replay_with_files_needs_no_database(db, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(trace_text(flavor="gpu"))
    cluster = tmp_path / "c.yaml"
    cluster.write_text("nodes:\n  - {flavor: gpu, devices: 8, count: 2}\n")
    quotas = tmp_path / "q.csv"
    quotas.write_text("project,flavor,guaranteed,borrow_limit\nvision,gpu,8,8\nspeech,gpu,8,8\n")
    out, _ = replay("--trace", str(trace), "--cluster", str(cluster), "--quotas", str(quotas), "--policy",
                    "fifo-skip", "--no-progress")
    assert any(line.startswith("fifo-skip ") for line in out.splitlines())
    guarantees = {line.split()[0]: line.split()[12] for line in out.splitlines()
                  if line.split() and line.split()[0] in ("vision", "speech")}
    assert guarantees == {"vision": "8", "speech": "8"}


def test_bad_row_exits_2_naming_the_line(inventory, tmp_path):
    trace = tmp_path / "bad.csv"
    trace.write_text(trace_text(n=2, extra="x,0,-5,8,1,nvidia-h100-80gb,vision,normal,,\n"))
    with pytest.raises(CommandError) as exc:
        replay("--trace", str(trace), "--no-progress")
    assert exc.value.returncode == 2
    assert "bad.csv line 4: negative duration_s -5 [negative_duration]" in str(exc.value)


def test_skip_invalid_counts_skipped_rows(inventory, tmp_path):
    trace = tmp_path / "bad.csv"
    trace.write_text(trace_text(n=4, extra="x,0,10,8,1,tpu,vision,normal,,\n"))
    out, err = replay("--trace", str(trace), "--skip-invalid", "--no-progress")
    assert "skipped 1 rows (unknown_flavor: 1)" in err
    assert any(line.startswith("production ") and " 4 " in line for line in out.splitlines())


def test_unknown_policy_and_empty_inventory_exit_2(db, trace_file, tmp_path):
    with pytest.raises(CommandError, match="no nodes"):
        replay("--trace", str(trace_file))
    quotas = tmp_path / "q.csv"
    quotas.write_text("project,flavor,guaranteed\nvision,nvidia-h100-80gb,8\n")
    cluster = tmp_path / "c.csv"
    cluster.write_text("flavor,devices,count\nnvidia-h100-80gb,8,2\n")
    with pytest.raises(CommandError, match="unknown policy 'lottery'") as exc:
        replay("--trace", str(trace_file), "--cluster", str(cluster), "--quotas", str(quotas), "--policy", "lottery")
    assert exc.value.returncode == 2


def _export(tmp_path, *extra: str, name: str = "t.csv") -> tuple[list[dict], str]:
    since = (timezone.now() - timedelta(days=3)).date().isoformat()
    path = tmp_path / name
    err = io.StringIO()
    call_command("export_trace", "--since", since, "--out", str(path), *extra, stderr=err)
    with open(path) as f:
        return list(csv.DictReader(f)), err.getvalue()


def test_export_trace_of_finished_jobs(history, tmp_path):
    rows, err = _export(tmp_path)
    assert len(rows) == 16 and "exported 16 jobs" in err and "not_run: 1" in err
    assert {r["project"] for r in rows} == {"vision", "speech"} and {r["user"] for r in rows} == {"alice", "bob"}
    assert rows[0]["submit_s"] == "0" and float(rows[-1]["submit_s"]) == 30 * 60
    by_id = {r["job_id"]: r for r in rows}
    first = history[0]
    assert by_id[str(first.pk)]["duration_s"] == "3600" and by_id[str(first.pk)]["devices_per_replica"] == "8"
    # The exported trace replays on the current cluster.
    out, _ = replay("--trace", str(tmp_path / "t.csv"), "--no-progress")
    assert any(line.startswith("production ") and " 16 " in line for line in out.splitlines())


def test_export_trace_anonymized_names_differ_and_are_stable(history, tmp_path):
    rows, _ = _export(tmp_path, "--anonymize")
    projects, users = {r["project"] for r in rows}, {r["user"] for r in rows}
    assert len(projects) == 2 and len(users) == 2
    assert not projects & {"vision", "speech"} and not users & {"alice", "bob"}
    assert all(p.startswith("p-") and len(p) == 12 for p in projects) and all(u.startswith("u-") for u in users)
    assert {r["job_id"] for r in rows} == {f"job-{i}" for i in range(1, 17)}  # ids renumbered, not the real pks
    again, _ = _export(tmp_path, "--anonymize", name="again.csv")
    assert [r["project"] for r in again] == [r["project"] for r in rows]  # stable with one (default) salt
    salted, _ = _export(tmp_path, "--anonymize", "--salt", "other", name="salted.csv")
    assert {r["project"] for r in salted}.isdisjoint(projects)


def test_export_trace_rejects_a_bad_range(db, tmp_path):
    with pytest.raises(CommandError, match="not a date"):
        call_command("export_trace", "--since", "yesterday", "--out", str(tmp_path / "x.csv"))
    with pytest.raises(CommandError, match="after --since"):
        call_command("export_trace", "--since", "2025-02-01", "--until", "2025-01-01", "--out", str(tmp_path / "x"))
