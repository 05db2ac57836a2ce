"""Usage segments follow an elastic attempt's device count exactly (issue 29): each resize closes the open segment
and opens one at the new count, so the device-seconds metered are the sum over the resize history."""

from __future__ import annotations

import pytest

from chaos.invariants import consistent, segments_match
from costs.models import UsageSegment
from jobs import lifecycle
from jobs.lifecycle import transition
from jobs.models import Attempt
from jobs.services import job_submit
from jobs.states import State
from quotas.models import Quota
from tests.costs.conftest import at
from tests.jobs.conftest import admit, spec

pytestmark = pytest.mark.django_db


def elastic_job(tenant, flavor, low, high):
    body = spec(flavor, replicas=high)
    body["groups"][0]["min_replicas"] = low
    return job_submit(actor=tenant.users["member"], project=tenant.project, spec=body).job


def resize(job, kind, rows, when):
    attempt = Attempt.objects.get(pk=job.current_attempt_id)
    done = lifecycle.resize(job.pk, attempt_id=attempt.pk, version=attempt.resize_count, kind=kind, replicas=rows,
                            reason="test", now=when)
    assert done is not None
    return done


def row(index, node):
    return {"role": "worker", "index": index, "node": node, "devices": 8}


def test_segments_device_seconds_equal_the_sum_over_the_resize_history(tenant, prices,
                                                                       django_capture_on_commit_callbacks):
    cluster, h100 = prices["cluster"], prices["h100"]
    Quota.objects.filter(project=tenant.project, flavor=h100).update(borrow_limit=16)  # room for 4 x 8 in quota
    job = elastic_job(tenant, h100, 1, 4)
    job = admit(job, cluster, ["r1-n1"], now=at(0))
    for state in (State.DISPATCHING, State.RUNNING):
        job = transition(job, state, reason="test", actor="backend", now=at(0.5))
    with django_capture_on_commit_callbacks(execute=True):
        resize(job, "grow", [row(1, "r1-n2"), row(2, "r2-n1")], at(1))
        resize(job, "shrink", [row(2, "r2-n1")], at(2.25))
        resize(job, "grow", [row(2, "r2-n2"), row(3, "r2-n1")], at(3))
    assert consistent() == []  # the consistency checks see one open segment at the attempt's devices
    transition(job, State.SUCCEEDED, reason="done", actor="backend", now=at(4))
    assert consistent() == [] and segments_match([job.pk]) == []  # the chaos invariant too

    attempt = Attempt.objects.get(pk=job.current_attempt_id)
    history = [(at(0.5), 1)] + [(r.at, r.new_replicas) for r in attempt.resizes.order_by("at")]
    ends = [moment for moment, _ in history[1:]] + [attempt.ended_at]
    held = sum(int((end - start).total_seconds()) * replicas * 8
               for (start, replicas), end in zip(history, ends, strict=True))
    pieces = list(UsageSegment.objects.filter(job=job).order_by("start_ts")
                  .values_list("devices", "start_ts", "end_ts", "outcome", "attempt_id", "attempt_number"))
    assert [p[0] for p in pieces] == [8, 24, 16, 32]
    assert [p[3] for p in pieces] == ["resized", "resized", "resized", "succeeded"]
    assert all(a == b for (_, _, a, *_), (_, b, *_) in zip(pieces, pieces[1:], strict=False))  # no gap, no overlap
    metered = sum((end - start) * devices for devices, start, end, *_ in pieces)
    assert metered == held == 8 * 3600 * (1 * 0.5 + 3 * 1.25 + 2 * 0.75 + 4 * 1)
    assert [p[4] for p in pieces] == [None, None, None, attempt.pk]  # the attempt points to its current segment
    assert {p[5] for p in pieces} == {attempt.number}
    cpu = UsageSegment.objects.filter(job=job).order_by("start_ts").values_list("cpu_millis", flat=True)
    assert list(cpu) == [4000, 12000, 8000, 16000]


def test_an_elastic_attempt_opens_its_segment_at_its_minimum(tenant, prices):
    cluster, h100 = prices["cluster"], prices["h100"]
    job = admit(elastic_job(tenant, h100, 2, 4), cluster, ["r1-n1", "r1-n2"], now=at(0))
    for state in (State.DISPATCHING, State.RUNNING):
        job = transition(job, state, reason="test", actor="backend", now=at(0))
    segment = UsageSegment.objects.get(job=job)
    assert (segment.devices, segment.cpu_millis) == (16, 8000)
