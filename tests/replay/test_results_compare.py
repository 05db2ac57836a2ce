"""Results math and compare() on hand-made runs."""

import json

import pytest

from jobs.scheduling.model import Policy, Project, Quota
from replay.cluster import QuotaSet, uniform_cluster
from replay.compare import compare, format_compare
from replay.engine import run_replay
from replay.report import format_table, write_outputs
from replay.results import job_rows, summarize, wait_cdf
from replay.trace import trace_from_text
from tests.replay.scripted import Script

HEADER = "job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project,priority,user,max_runtime_s\n"
QUOTAS = QuotaSet((Quota("p", "gpu", 1), Quota("q", "gpu", 1)), (Project("p", "c"), Project("q", "c")))
TRACE = trace_from_text(HEADER + "a,0,1000,1,1,gpu,p,,,\nb,0,1000,1,1,gpu,q,,,\nc,0,1000,1,1,gpu,q,,,\n")
CLUSTER = uniform_cluster(2, 1, "gpu")


def _run(plan, label):
    r = run_replay(TRACE, CLUSTER, QUOTAS, Policy(), cycle=Script(plan), policy_name=label)
    return r


@pytest.fixture
def before():
    # p and q start together; q's second job waits for its first.
    return _run({0: [("admit", 1, "node-000", 1), ("admit", 2, "node-001", 1)],
                 1000: [("admit", 3, "node-000", 1)]}, "before")  # fmt: skip


@pytest.fixture
def after():
    # q runs both first; p waits.
    return _run({0: [("admit", 2, "node-000", 1), ("admit", 3, "node-001", 1)],
                 1000: [("admit", 1, "node-000", 1)]}, "after")  # fmt: skip


def test_summary_numbers(before):
    s = summarize(before)
    o = s["overall"]
    assert (o["jobs"], o["finished"], o["makespan"], o["devices"]) == (3, 3, 2000, 2)
    assert (o["started"], o["unfinished"], o["never_started"]) == (3, 0, 0)
    assert o["wait_mean"] == pytest.approx(1000 / 3)
    # numpy's linear interpolation between order statistics: [0, 0, 1000] -> p95 at rank 1.9
    assert o["wait_p50"] == 0 and o["wait_p95"] == pytest.approx(900) and o["wait_p99"] == pytest.approx(980)
    assert o["jct_mean"] == pytest.approx(4000 / 3)
    assert o["utilization"] == pytest.approx(3000 / 4000)
    p, q = s["projects"]["p"], s["projects"]["q"]
    assert p["share"] == pytest.approx(1000 / 4000) and q["share"] == pytest.approx(2000 / 4000)
    assert p["guarantee_share"] == 0.5 and p["mean_devices"] == pytest.approx(0.5)
    # q waited 1000 s while using its whole guarantee: not starved.
    assert q["demand_seconds"] == 1000 and q["under_guarantee_seconds"] == 0 and q["guarantee_met"] == 1.0
    assert json.loads(json.dumps(s, default=str))["name"] == "before"
    rows = job_rows(before)
    assert rows[2]["wait"] == 1000 and rows[2]["state"] == "done"
    w, f = wait_cdf(before)
    assert list(w) == [0, 0, 1000] and f[-1] == 1.0


def test_compare_names_gainers_and_losers(before, after):
    c = compare(before, after)
    assert (c["a"], c["b"]) == ("before", "after")
    assert c["projects"]["p"]["wait_mean"] == {"a": 0, "b": 1000, "delta": 1000}
    assert c["projects"]["p"]["verdict"] == "loses" and c["projects"]["q"]["verdict"] == "gains"
    assert c["losers"] == ["p"] and c["gainers"] == ["q"]
    assert c["overall"]["verdict"] == "same"  # the mean wait is 333 s either way
    assert c["projects"]["p"]["starved_seconds"]["b"] == 1000  # p waited under its guarantee with room
    assert compare(summarize(before), summarize(after)) == c
    text = format_compare(c)
    assert "loses" in text and "gains" in text and text.splitlines()[-1].startswith("ALL")


def test_outputs_written(before, after, tmp_path):
    files = write_outputs([before, after], tmp_path, extra_text="x")
    for key in ("summary_csv", "summary_json", "utilization", "wait_cdf", "html", "jobs_before"):
        assert files[key].exists() and files[key].stat().st_size > 0
    html = files["html"].read_text()
    assert "data:image/png;base64," in html and "http" not in html.replace("http-equiv", "")
    assert files["utilization"].read_bytes()[:4] == b"\x89PNG"
    assert len(json.loads(files["summary_json"].read_text())) == 2
    assert files["summary_csv"].read_text().count("\n") == 1 + 2 * 3  # header, (ALL + 2 projects) x 2
    table = format_table([summarize(before), summarize(after)])
    assert "before" in table and "after: project" in table


@pytest.fixture
def starved():
    # q's second job never starts: nobody admits it.
    return _run({0: [("admit", 1, "node-000", 1), ("admit", 2, "node-001", 1)]}, "starved")


def test_a_job_that_never_started_is_not_a_zero_wait(before, starved):
    s = summarize(starved)
    o, q = s["overall"], s["projects"]["q"]
    assert (o["jobs"], o["started"], o["finished"], o["never_started"], o["unfinished"]) == (3, 2, 2, 1, 0)
    assert (q["jobs"], q["never_started"]) == (2, 1)
    # Waits are over the started jobs: two zero waits, the never-started job is not a third.
    assert o["wait_mean"] == 0 and q["wait_mean"] == 0 and q["wait_p99"] == 0
    w, f = wait_cdf(starved)
    assert list(w) == [0, 0] and f[-1] == pytest.approx(2 / 3)  # the CDF stays below 1: one job waits forever
    table = format_table([s])
    assert table.splitlines()[0].endswith("never started")
    assert table.splitlines()[2].split()[-1] == "1"


def test_a_project_whose_jobs_never_start_has_no_wait_statistics():
    quotas = QuotaSet((Quota("p", "gpu", 1),), (Project("p", "c"),))
    r = run_replay(TRACE, CLUSTER, quotas, Policy(), cycle=Script({0: [("admit", 1, "node-000", 1)]}))
    q = summarize(r)["projects"]["q"]
    assert q["never_started"] == 2
    assert {q[k] for k in ("wait_mean", "wait_p50", "wait_p95", "wait_p99", "jct_mean")} == {None}
    row = next(line for line in format_table([summarize(r)]).splitlines() if line.startswith("q "))
    assert row.split()[1:6] == ["2", "-", "-", "-", "-"]  # jobs, then wait mean, p50, p95, p99: not 0


def test_compare_counts_a_job_left_unstarted_as_a_loss(before, starved):
    c = compare(before, starved)
    q = c["projects"]["q"]
    assert q["never_started"] == {"a": 0, "b": 1, "delta": 1}
    # q's mean wait falls from 500 s to 0 s only because its waiting job never started: a loss, not a gain.
    assert q["wait_mean"]["b"] == 0 and q["verdict"] == "loses"
    assert c["losers"] == ["q"] and c["gainers"] == []
    assert compare(starved, before)["projects"]["q"]["verdict"] == "gains"
    assert "never d" in format_compare(c)


def test_compare_with_no_started_job_on_either_side_is_same():
    quotas = QuotaSet((Quota("p", "gpu", 1),), (Project("p", "c"),))
    a = run_replay(TRACE, CLUSTER, quotas, Policy(), cycle=Script({0: [("admit", 1, "node-000", 1)]}))
    c = compare(a, a)
    assert c["projects"]["q"]["wait_mean"] == {"a": None, "b": None, "delta": None}
    assert c["projects"]["q"]["verdict"] == "same"
    line = next(x for x in format_compare(c).splitlines() if x.startswith("q "))
    assert line.split()[1:4] == ["-", "-", "-"]
