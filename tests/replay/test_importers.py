"""Importers on small slices of the shared public traces (skipped when the traces are not present)."""

import itertools

import pytest

from replay.api import load_cluster, load_quotas, load_trace
from replay.cluster import uniform_cluster
from replay.importers import import_philly, import_philly_quotas
from replay.paths import trace_path, traces_dir
from replay.scenarios import PHILLY_QUOTA, PHILLY_WEEK
from replay.trace import TraceError

needs_traces = pytest.mark.skipif(not (traces_dir() / PHILLY_WEEK).exists(), reason="shared traces not present")


def _slice(src, dest, rows, extra=()):
    with open(src) as f:
        lines = list(itertools.islice(f, rows + 1))
    dest.write_text("".join(lines) + "".join(extra))
    return dest


@needs_traces
def test_philly_slice_rebased_and_split(tmp_path):
    p = _slice(trace_path(PHILLY_WEEK), tmp_path / "p.csv", 50,
               ["philly-x,2017-10-16 01:00:00,1299600,10,16,160,ee9e8c,\n"])  # fmt: skip
    t = load_trace(p)  # detected from the header
    assert len(t) == 51
    assert t.jobs[0].submit == 0 and t.jobs[0].project == "11cb48"
    big = next(j for j in t.jobs if j.job_id == "philly-x")
    assert (big.devices, big.replicas, big.flavor) == (8, 2, "gpu")
    assert big.submit == 1299600 - 1296124


@needs_traces
def test_philly_bad_rows(tmp_path):
    p = _slice(trace_path(PHILLY_WEEK), tmp_path / "p.csv", 3,
               ["bad,2017-10-16,1296200,-4,1,0,vc,\n", "none,2017-10-16,1296200,4,0,0,vc,\n"])  # fmt: skip
    with pytest.raises(TraceError) as exc:
        import_philly(p)
    assert exc.value.line == 5 and exc.value.reason == "negative_duration"
    t = import_philly(p, skip_invalid=True)
    assert len(t) == 3 and dict(t.skipped.counts) == {"negative_duration": 1, "malformed": 1}
    assert "num_gpus 0 must be positive" in t.skipped.examples[1]


@needs_traces
def test_philly_jobs_of_12_gpus_are_a_whole_node_plus_4(tmp_path):
    # The full Philly trace has 7 jobs of 12 GPUs (vc e13805, 2017-10-25 to 27); they were rejected as
    # "cannot be split into nodes of 8". The reference simulators place them on a whole node plus 4 GPUs.
    rows = ["twelve,2017-10-16 01:00:00,1299600,1257,12,15084,e13805,\n",
            "twenty,2017-10-16 01:00:00,1299600,60,20,1200,e13805,\n"]  # fmt: skip
    p = _slice(trace_path(PHILLY_WEEK), tmp_path / "p.csv", 5, rows)
    t = import_philly(p, limits=uniform_cluster(4, 8, "gpu").limits())
    assert len(t) == 7 and not t.skipped.total
    by_id = {j.job_id: j for j in t.jobs}
    assert [(j.devices, j.replicas, j.remainder) for j in (by_id["twelve"], by_id["twenty"])] == [(8, 1, 4), (8, 2, 4)]
    assert by_id["twelve"].total_devices == 12 and by_id["twelve"].duration == 1257


@needs_traces
def test_philly_quotas_scaled_to_704_gpus():
    q = import_philly_quotas(trace_path(PHILLY_QUOTA), scale=0.25)
    assert len(q.quotas) == 11
    assert sum(x.guaranteed for x in q.quotas) == 704
    assert {x.project: x.guaranteed for x in q.quotas}["6214e9"] == 128
    assert all(x.borrow_limit == 704 - x.guaranteed for x in q.quotas)
    assert {p.cohort for p in q.projects} == {"philly"}
    assert all(x.borrow_limit == 0 for x in import_philly_quotas(trace_path(PHILLY_QUOTA), borrowing=False).quotas)
    full = load_quotas(trace_path(PHILLY_QUOTA))  # detected from the header
    assert sum(x.guaranteed for x in full.quotas) == 2816


@needs_traces
def test_alibaba_nodes_as_cluster(tmp_path):
    p = _slice(trace_path("alibaba2023_gpu_nodes.csv"), tmp_path / "a.csv", 1213)
    c = load_cluster(p)
    assert len(c.nodes) == 1213
    by = c.devices_by_flavor()
    assert set(by) == {"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}
    assert c.limits().node_devices["G2"] == 8


@needs_traces
def test_philly_against_a_cluster_without_its_flavor(tmp_path):
    p = _slice(trace_path(PHILLY_WEEK), tmp_path / "p.csv", 3)
    with pytest.raises(TraceError) as exc:
        load_trace(p, cluster=uniform_cluster(1, 8, "A10"))
    assert (exc.value.line, exc.value.reason) == (2, "unknown_flavor")


@needs_traces
def test_a_philly_file_without_job_rows_is_an_error(tmp_path):
    p = _slice(trace_path(PHILLY_WEEK), tmp_path / "header.csv", 0)
    with pytest.raises(TraceError) as exc:
        load_trace(p)  # detected as Philly from the header, then nothing to replay
    assert (exc.value.source, exc.value.line, exc.value.reason) == (str(p), 1, "no_jobs")
