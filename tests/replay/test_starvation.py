"""No starvation: a big gang among a flood of small jobs of its own project starts by its promised start
(Policy.reserve_after after it arrived) or, if later, once the jobs running when it arrived have ended (a flood job
that ends before the gang's reservation may still slip in; one that would still run then never does)."""

from __future__ import annotations

import pytest

from jobs.scheduling.model import Policy, Project, Quota
from replay import QuotaSet, Trace, TraceJob, run
from replay.cluster import uniform_cluster

CLUSTER = uniform_cluster(8, 8, "gpu")  # 64 GPUs
QUOTAS = QuotaSet((Quota("vision", "gpu", 64),), (Project("vision", "acme"),))
HOUR = 3600.0
GANG_AT = 1800.0

FLOOD_CASES = [
    # (name, hours of flood: a 1-GPU, 1 h job every 30 s, a 25 h job right after the gang)
    ("3 h flood", 3, False),
    ("6 h flood", 6, False),
    ("6 h flood and a 25 h job submitted after the gang", 6, True),
]


def flood(hours: int, long_job: bool) -> Trace:
    jobs = [TraceJob(f"small-{k}", k * 30.0, HOUR, 1, 1, "gpu", "vision") for k in range(int(hours * HOUR / 30))]
    jobs.append(TraceJob("gang", GANG_AT, HOUR, 8, 8, "gpu", "vision"))
    if long_job:
        jobs.append(TraceJob("long", GANG_AT + 10, 25 * HOUR, 1, 1, "gpu", "vision"))
    return Trace(tuple(sorted(jobs, key=lambda j: j.submit)))


@pytest.mark.parametrize("reserve_after", [Policy().reserve_after, 0.0], ids=["default promise", "at once"])
@pytest.mark.parametrize("name,hours,long_job", FLOOD_CASES, ids=[c[0] for c in FLOOD_CASES])
def test_a_big_gang_in_a_flood_starts_within_its_bound(name, hours, long_job, reserve_after):
    result = run(flood(hours, long_job), CLUSTER, QUOTAS, Policy(reserve_after=reserve_after))
    by_id = {j.job_id: j for j in result.jobs}
    gang = by_id["gang"]
    # The bound: its promised start, or the last end of the jobs running when the gang arrived if later.
    running_then = [j for j in result.jobs if j.first_start is not None and j.first_start <= GANG_AT < j.end]
    bound = max(GANG_AT + reserve_after, *(j.end for j in running_then))
    assert gang.first_start is not None and gang.first_start <= bound
    assert max(j.end for j in running_then) - GANG_AT <= HOUR  # they were 1 h jobs
    if long_job:
        assert by_id["long"].first_start >= gang.first_start
