"""A spent hard budget in the pure core: the project's non-preemptible jobs wait (code `budget`, the caller's reason),
its preemptible ones are still admitted, other projects are unaffected, and a strict queue is not blocked by it."""

from __future__ import annotations

import pytest

from jobs.scheduling import Policy, Project, Quota, forecast, run_cycle

from .builders import A100, admitted, check_invariants, job, nodes, snapshot, waits

REASON = "project vision has spent 10,240 USD of its 10,000 USD budget for December; only preemptible jobs are admitted"
QUOTAS = (Quota("vision", A100, 16), Quota("nlp", A100, 16))


def projects(stopped: dict[str, str]) -> tuple[Project, ...]:
    return tuple(Project(name, "acme", budget_stop=stopped.get(name, "")) for name in ("vision", "nlp"))


CASES = [
    # name, budget stops, pending, policy, admitted, {job: wait code}
    ("hard budget spent: only the preemptible job", {"vision": REASON},
     [job(1), job(2, preemptible=True, priority=0)], Policy(), [2], {1: "budget"}),
    ("no budget stop: both admitted", {},
     [job(1), job(2, preemptible=True, priority=0)], Policy(), [1, 2], {}),
    ("another project's stop changes nothing here", {"nlp": "project nlp has spent ..."},
     [job(1), job(2, project="nlp", preemptible=True, priority=0)], Policy(), [1, 2], {}),
    ("the stopped job does not block a strict queue", {"vision": REASON},
     [job(1), job(2, preemptible=True, priority=0)], Policy(blocking="strict"), [2], {1: "budget"}),
    ("without explanations (replay, forecasts) the same decision", {"vision": REASON},
     [job(1), job(2, preemptible=True, priority=0)], Policy(explain=False), [2], {1: "budget"}),
    ("every non-preemptible job of the project waits", {"vision": REASON},
     [job(1), job(3, priority=1000), job(2, preemptible=True, priority=0), job(4, project="nlp")], Policy(),
     [2, 4], {1: "budget", 3: "budget"}),
]


@pytest.mark.parametrize("name,stops,pending,policy,expect_admits,expect_waits", CASES, ids=[c[0] for c in CASES])
def test_a_spent_hard_budget_admits_only_preemptible_jobs(name, stops, pending, policy, expect_admits, expect_waits):
    snap = snapshot(nodes(4), pending, quotas=QUOTAS, projects=projects(stops))
    result = run_cycle(snap, policy)
    check_invariants(snap, result, policy)
    assert sorted(admitted(result)) == expect_admits
    waiting = waits(result)
    assert {job_id: wait.code for job_id, wait in waiting.items()} == expect_waits
    for job_id in expect_waits:
        assert waiting[job_id].reason == stops["vision"]


def test_a_job_stopped_by_its_budget_gets_no_estimated_start():
    snap = snapshot(nodes(1), [job(1), job(2, preemptible=True, priority=0, max_runtime=600.0)], quotas=QUOTAS,
                    projects=projects({"vision": REASON}))
    starts = forecast(snap, Policy(), 10)
    assert starts == {2: snap.now}
