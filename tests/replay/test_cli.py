"""The CLI entry point the Django command wraps."""

import io

import pytest

from replay.cli import main, progress_bar
from tests.replay.core import needs_core

HEADER = "job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project,priority,user,max_runtime_s\n"


def _files(tmp_path, rows):
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "".join(r + "\n" for r in rows))
    cluster = tmp_path / "c.csv"
    cluster.write_text("flavor,devices,count\ngpu,8,2\n")
    quotas = tmp_path / "q.csv"
    quotas.write_text("project,flavor,guaranteed,borrow_limit\np,gpu,8,8\nq,gpu,8,8\n")
    return ["--trace", str(trace), "--cluster", str(cluster), "--quotas", str(quotas), "--no-progress"]


def test_bad_trace_exits_2_naming_the_line(tmp_path, capsys):
    args = _files(tmp_path, ["a,0,10,1,1,gpu,p,,,", "b,0,10,4,1,tpu,p,,,"])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "t.csv line 3: unknown flavor 'tpu'" in err


def test_unknown_policy_exits_2(tmp_path, capsys):
    assert main([*_files(tmp_path, ["a,0,10,1,1,gpu,p,,,"]), "--policy", "lottery"]) == 2
    assert "unknown policy 'lottery'" in capsys.readouterr().err


def test_progress_bar_draws_eta():
    buf = io.StringIO()
    bar = progress_bar("prod", buf)
    bar(0, 10, 0.0)
    bar(10, 10, 86400.0)
    text = buf.getvalue()
    assert "100%" in text and "10/10 jobs" in text and "done" in text and text.endswith("\n")


@needs_core
def test_replay_and_compare_write_outputs(tmp_path, capsys):
    rows = [f"j{i},{i * 10},{100 + i},{1 + i % 4},1,gpu,{'pq'[i % 2]},,," for i in range(30)] + [
        "bad,0,-1,1,1,gpu,p,,,"
    ]
    out = tmp_path / "out"
    args = [*_files(tmp_path, rows), "--policy", "production", "--compare", "strict-fifo", "pooled-fifo",
            "--skip-invalid", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "skipped 1 rows (negative_duration: 1)" in captured.err
    assert "strict-fifo vs production" in captured.out
    assert "production" in captured.out and "pooled-fifo" in captured.out
    assert (out / "report.html").exists() and (out / "summary.json").exists()


def test_a_trace_without_job_rows_exits_2_naming_the_file(tmp_path, capsys):
    args = _files(tmp_path, [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"replay: error: {tmp_path / 't.csv'} line 1: no job rows after the header [no_jobs]" in err


def test_manage_py_replay_of_a_trace_without_job_rows_exits_2(tmp_path):
    # `manage.py replay` wraps run_cli and turns a TraceError into a clean exit with status 2.
    from django.core.management import CommandError, call_command

    args = _files(tmp_path, [])
    with pytest.raises(CommandError) as exc:
        call_command("replay", *args, stdout=io.StringIO(), stderr=io.StringIO())
    assert exc.value.returncode == 2
    assert str(exc.value) == f"{tmp_path / 't.csv'} line 1: no job rows after the header [no_jobs]"


@needs_core
def test_isolated_baselines_with_a_project_without_quota(tmp_path, capsys):
    # Project "r" holds no quota: on isolated partitions it has no nodes; its jobs are reported as never started.
    rows = ["a,0,10,1,1,gpu,p,,,", "b,0,10,1,1,gpu,q,,,", "c,5,10,1,1,gpu,r,,,", "d,6,10,2,1,gpu,r,,,"]
    args = [*_files(tmp_path, rows), "--policy", "strict-fifo", "--compare", "fifo-skip", "sjf", "--partition", "auto"]
    assert main(args) == 0
    captured = capsys.readouterr()
    for name in ("strict-fifo", "fifo-skip", "sjf"):
        assert f"{name}: no partition for projects without a quota (r): 2 jobs will never start" in captured.err
        overall = next(line for line in captured.out.splitlines() if line.startswith(f"{name} "))
        assert overall.split()[-1] == "2"  # the "never started" column
    assert "Traceback" not in captured.err


def test_a_quota_for_a_flavor_the_cluster_lacks_exits_2_on_partitions(tmp_path, capsys):
    args = _files(tmp_path, ["a,0,10,1,1,gpu,p,,,"])
    (tmp_path / "q.csv").write_text("project,flavor,guaranteed\np,gpu,8\nq,tpu,8\n")
    assert main([*args, "--policy", "strict-fifo", "--partition", "auto"]) == 2
    assert "project q names flavor 'tpu', which the cluster lacks" in capsys.readouterr().err
