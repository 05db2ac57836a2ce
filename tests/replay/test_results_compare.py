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
