"""Trace format: parsing, every bad-input error with its line number, skip counts, round trip."""

import io

import pytest

from replay.cluster import uniform_cluster
from replay.trace import TraceError, read_trace, trace_from_text, write_trace

HEADER = "job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project,priority,user,max_runtime_s\n"
LIMITS = uniform_cluster(2, 8, "a100").limits()  # two nodes of 8: at most 16 devices, 8 per replica


def test_reads_rows_sorted_by_submit_with_defaults():
    t = trace_from_text(HEADER + "b,20,5,1,1,a100,p,,,\na,10,7,8,2,a100,q,high,alice,100\n", limits=LIMITS)
    assert [j.job_id for j in t.jobs] == ["a", "b"]
    a, b = t.jobs
    assert (a.submit, a.duration, a.devices, a.replicas, a.total_devices) == (10, 7, 8, 2, 16)
    assert (a.priority, a.user, a.max_runtime) == ("high", "alice", 100)
    assert (b.priority, b.user, b.max_runtime) == ("normal", "", None)


def test_total_devices_is_split_into_node_sized_replicas():
    text = "submit_s,duration_s,total_devices,flavor,project\n0,1,4,a100,p\n0,1,16,a100,p\n"
    t = trace_from_text(text, limits=LIMITS)
    assert [(j.devices, j.replicas, j.remainder) for j in t.jobs] == [(4, 1, 0), (8, 2, 0)]
    assert t.jobs[0].job_id == "line-2"


def test_a_total_that_is_not_whole_nodes_is_whole_nodes_plus_one_smaller_replica():
    # 12 devices on 8-device nodes: one whole node and 4 devices, as the reference simulators place it.
    text = "submit_s,duration_s,total_devices,flavor,project\n0,1,12,a100,p\n0,1,9,a100,p\n"
    twelve, nine = trace_from_text(text, limits=LIMITS).jobs
    assert (twelve.devices, twelve.replicas, twelve.remainder, twelve.total_devices) == (8, 1, 4, 12)
    assert (nine.devices, nine.replicas, nine.remainder, nine.total_devices) == (8, 1, 1, 9)
    explicit = "submit_s,duration_s,devices_per_replica,replicas,remainder_devices,total_devices,flavor,project\n"
    job = trace_from_text(explicit + "0,1,4,2,2,10,a100,p\n", limits=LIMITS).jobs[0]
    assert (job.devices, job.replicas, job.remainder, job.total_devices) == (4, 2, 2, 10)
    with pytest.raises(TraceError, match="23 devices but the cluster has 16"):  # the remainder counts
        trace_from_text(explicit + "0,1,8,2,7,,a100,p\n", limits=LIMITS)
    with pytest.raises(TraceError, match="17 devices but the cluster has 16"):
        trace_from_text("submit_s,duration_s,total_devices,flavor,project\n0,1,17,a100,p\n", limits=LIMITS)


def test_comments_are_skipped_but_line_numbers_stay_physical():
    text = "# a note\n" + HEADER + "# another\nx,1,-5,1,1,a100,p,,,\n"
    with pytest.raises(TraceError) as exc:
        trace_from_text(text, limits=LIMITS)
    assert exc.value.line == 4 and exc.value.reason == "negative_duration"
    assert "line 4" in str(exc.value)


@pytest.mark.parametrize(
    ("row", "reason", "words"),
    [
        ("x,1,5,1,1,a100,p,,", "malformed", "9 fields"),
        ("x,abc,5,1,1,a100,p,,,", "malformed", "submit_s is not a number"),
        ("x,1,nan,1,1,a100,p,,,", "malformed", "not a finite number"),
        ("x,1,5,1.5,1,a100,p,,,", "malformed", "whole number"),
        ("x,1,5,0,1,a100,p,,,", "malformed", "must be positive"),
        ("x,,5,1,1,a100,p,,,", "malformed", "missing submit_s"),
        ("x,-1,5,1,1,a100,p,,,", "negative_submit", "negative submit_s"),
        ("x,1,-5,1,1,a100,p,,,", "negative_duration", "negative duration_s -5"),
        ("x,1,5,16,1,a100,p,,,", "too_large", "16 devices per replica"),
        ("x,1,5,8,3,a100,p,,,", "too_large", "24 devices but the cluster has 16"),
        ("x,1,5,1,1,h100,p,,,", "unknown_flavor", "unknown flavor 'h100'"),
        ("x,1,5,1,1,a100,p,urgent,,", "unknown_priority", "priority 'urgent'"),
        ("x,1,5,1,1,a100,p,,,-3", "malformed", "max_runtime_s must be positive"),
    ],
)
def test_bad_rows_name_the_line_and_reason(row, reason, words):
    text = HEADER + "ok,0,1,1,1,a100,p,,,\n" + row + "\n"
    with pytest.raises(TraceError) as exc:
        trace_from_text(text, limits=LIMITS)
    assert exc.value.line == 3
    assert exc.value.reason == reason
    assert words in str(exc.value)
    assert str(exc.value).startswith("<trace> line 3:") or "line 3:" in str(exc.value)


def test_total_devices_errors():
    text = "submit_s,duration_s,devices_per_replica,replicas,total_devices,flavor,project\n0,1,2,2,5,a100,p\n"
    with pytest.raises(TraceError, match="total_devices 5 != 2 x 2"):
        trace_from_text(text, limits=LIMITS)
    explicit = "submit_s,duration_s,devices_per_replica,replicas,remainder_devices,total_devices,flavor,project\n"
    with pytest.raises(TraceError, match=r"total_devices 11 != 4 x 2 replicas \+ 2"):
        trace_from_text(explicit + "0,1,4,2,2,11,a100,p\n", limits=LIMITS)
    # The remainder is one smaller replica: as large as the others, it would just be one more of them.
    for remainder in ("4", "-1"):
        with pytest.raises(TraceError, match=f"remainder_devices {remainder} must be from 0 to below") as exc:
            trace_from_text(explicit + f"0,1,4,2,{remainder},,a100,p\n", limits=LIMITS)
        assert exc.value.reason == "malformed"
    with pytest.raises(TraceError, match="give devices_per_replica"):
        trace_from_text("submit_s,duration_s,flavor,project\n0,1,a100,p\n")


def test_duplicate_ids_and_header_problems():
    with pytest.raises(TraceError) as exc:
        trace_from_text(HEADER + "x,0,1,1,1,a100,p,,,\nx,0,1,1,1,a100,p,,,\n")
    assert (exc.value.line, exc.value.reason) == (3, "duplicate_id")
    with pytest.raises(TraceError, match="header lacks"):
        trace_from_text("job_id,submit_s\n")
    with pytest.raises(TraceError, match="empty file"):
        trace_from_text("")


def test_a_trace_without_job_rows_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "week.csv"
    path.write_text(HEADER + "# nothing after the header but a comment\n")
    with pytest.raises(TraceError) as exc:
        read_trace(path)
    assert exc.value.reason == "no_jobs"
    assert str(exc.value) == f"{path} line 1: no job rows after the header [no_jobs]"
    # Every row dropped by skip_invalid leaves nothing to replay either: say why.
    path.write_text(HEADER + "a,0,-1,1,1,a100,p,,,\nb,0,1,1,1,h100,p,,,\n")
    with pytest.raises(TraceError) as exc:
        read_trace(path, limits=LIMITS, skip_invalid=True)
    assert (exc.value.line, exc.value.reason) == (3, "no_jobs")
    assert "no valid job rows (skipped 2 rows (negative_duration: 1, unknown_flavor: 1))" in str(exc.value)


def test_without_limits_flavors_and_sizes_are_not_checked():
    t = trace_from_text(HEADER + "x,0,1,8,100,anything,p,,,\n")
    assert t.jobs[0].total_devices == 800


def test_skip_invalid_counts_by_reason():
    rows = [
        "a,0,1,1,1,a100,p,,,",
        "b,0,-1,1,1,a100,p,,,",
        "c,0,-2,1,1,a100,p,,,",
        "d,0,1,1,1,h100,p,,,",
        "e,zero,1,1,1,a100,p,,,",
        "f,0,1,8,4,a100,p,,,",
        "g,5,1,1,1,a100,q,,,",
    ]
    t = trace_from_text(HEADER + "\n".join(rows) + "\n", limits=LIMITS, skip_invalid=True)
    assert [j.job_id for j in t.jobs] == ["a", "g"]
    assert dict(t.skipped.counts) == {"negative_duration": 2, "unknown_flavor": 1, "malformed": 1, "too_large": 1}
    assert t.skipped.total == 5
    assert "skipped 5 rows" in t.skipped.summary() and "negative_duration: 2" in t.skipped.summary()
    assert "line 3" in t.skipped.examples[0]


def test_write_then_read_round_trip(tmp_path):
    # c asks for 12 devices in all: written as 1 x 8 + a remainder of 4, it must come back the same.
    t = trace_from_text(HEADER.replace("\n", ",total_devices\n") + "a,0.5,7,8,2,a100,q,high,alice,100,\n"
                        "b,1,2,1,1,a100,p,,,,\nc,2,3,,,a100,p,,,,12\n")
    assert t.jobs[2].remainder == 4
    path = tmp_path / "t.csv"
    assert write_trace(t.jobs, path) == 3
    again = read_trace(path, limits=LIMITS)
    assert again.jobs == t.jobs
    buf = io.StringIO()
    write_trace(t.jobs, buf)
    assert buf.getvalue().splitlines()[0].startswith("job_id,submit_s,duration_s")
