"""Per-flavor figures of a replay and of a what-if comparison: devices of different flavors are never added."""

from __future__ import annotations

import pytest

from jobs.scheduling.model import Project, Quota
from replay import ClusterShape, QuotaSet, Trace, TraceJob, run, summarize
from replay.api import with_quota
from replay.cluster import uniform_cluster
from replay.compare import compare_by_flavor
from replay.results import makespan, summarize_by_flavor

CLUSTER = ClusterShape(uniform_cluster(1, 8, "h100", prefix="h").nodes
                       + uniform_cluster(2, 8, "a100", prefix="a").nodes)
QUOTAS = QuotaSet((Quota("vision", "h100", 8), Quota("vision", "a100", 8), Quota("speech", "a100", 8, 8)),
                  (Project("vision", "acme"), Project("speech", "acme")))
# vision: one H100 job and three A100 jobs of 8 devices, 1000 s each; speech: one A100 job a second later.
TRACE = Trace(tuple(
    [TraceJob("h", 0, 1000, 8, 1, "h100", "vision")]
    + [TraceJob(f"a{i}", 0, 1000, 8, 1, "a100", "vision") for i in range(3)]
    + [TraceJob("s", 1, 1000, 8, 1, "a100", "speech")]))


def test_guarantees_and_shares_are_per_flavor():
    result = run(TRACE, CLUSTER, QUOTAS, "production")
    by_flavor = summarize_by_flavor(result)
    assert summarize(result)["projects"]["vision"]["guarantee"] == 16  # the per-project sum, kept as it was
    assert by_flavor["flavors"]["h100"]["devices"] == 8 and by_flavor["flavors"]["h100"]["guarantee"] == 8
    assert by_flavor["flavors"]["a100"]["devices"] == 16 and by_flavor["flavors"]["a100"]["guarantee"] == 16
    vision = by_flavor["projects"]["vision"]
    assert vision["h100"]["guarantee"] == 8 and vision["a100"]["guarantee"] == 8
    assert vision["h100"]["guarantee_share"] == 1.0 and vision["a100"]["guarantee_share"] == 0.5
    assert vision["h100"]["jobs"] == 1 and vision["a100"]["jobs"] == 3
    # each share is of its own flavor's device-time: the one H100 job used the whole H100 flavor while it ran
    assert vision["h100"]["share"] == 1000 * 8 / (8 * makespan(result))
    assert vision["a100"]["mean_devices"] == 3 * 1000 * 8 / makespan(result)
    assert "speech" not in {p for p, flavors in by_flavor["projects"].items() if "h100" in flavors}


def test_a_what_if_compares_each_project_and_flavor():
    before = run(TRACE, CLUSTER, QUOTAS, "production", label="current")
    after = run(TRACE, CLUSTER, with_quota(QUOTAS, "vision", "a100", guaranteed=16), "production", label="proposed")
    cmp = compare_by_flavor(before, after)
    assert cmp["flavors"]["a100"]["guarantee"] == {"a": 16, "b": 24, "delta": 8}
    assert cmp["flavors"]["h100"]["guarantee"] == {"a": 8, "b": 8, "delta": 0}
    vision = cmp["projects"]["vision"]
    assert vision["a100"]["guarantee"]["delta"] == 8 and vision["h100"]["guarantee"]["delta"] == 0
    assert vision["h100"]["verdict"] == "same"
    # 16 guaranteed A100 let vision run two jobs at once instead of one; speech's job then waits for them
    assert vision["a100"]["wait_mean"] == pytest.approx({"a": 1000.0, "b": 1000 / 3, "delta": 1000 / 3 - 1000.0})
    assert vision["a100"]["verdict"] == "gains" and cmp["projects"]["speech"]["a100"]["verdict"] == "loses"
    assert cmp == compare_by_flavor(summarize_by_flavor(before), summarize_by_flavor(after))  # dicts work too


def test_a_quota_only_one_side_has_counts_as_zero_on_the_other():
    before = run(TRACE, CLUSTER, QUOTAS, "production")
    after = run(TRACE, CLUSTER, with_quota(QUOTAS, "speech", "h100", guaranteed=4), "production")
    row = compare_by_flavor(before, after)["projects"]["speech"]["h100"]
    assert row["guarantee"] == {"a": 0.0, "b": 4, "delta": 4} and row["jobs"]["b"] == 0
    assert row["verdict"] == "same"
