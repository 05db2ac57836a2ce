"""`tidal reliability` against a live server: the caller's failures by cause and project and what they lost, as a
table or JSON; another organization's failures are not counted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.models import Node
from jobs.lifecycle import AttemptEnd, transition
from jobs.states import State
from quotas.models import Quota, ResourceFlavor
from tests.jobs.conftest import run, submit

pytestmark = pytest.mark.django_db(transaction=True)


def failed(tenant, demo_cluster, project, user) -> None:
    """A one-device H100 job of `project` that ran 10 minutes (no checkpoint) and failed with a CUDA OOM."""
    h100 = ResourceFlavor.objects.get(name="nvidia-h100-80gb")
    Quota.objects.get_or_create(project=project, flavor=h100, defaults={"guaranteed": 8})
    node = Node.objects.filter(cluster=demo_cluster, flavor=h100).order_by("name").first()
    job = run(submit(tenant, h100, devices=1, project=project, user=user), demo_cluster, [node.name],
              now=timezone.now() - timedelta(minutes=10))
    transition(job, State.FAILED, reason="failed", actor="backend", end=AttemptEnd(
        cause="user_error", exit_code=1, logs={"worker-0": ["torch.OutOfMemoryError: CUDA out of memory."]}))


def test_reliability_shows_failures_and_what_they_lost(cli, tenant, demo_cluster):
    failed(tenant, demo_cluster, tenant.project, "member")
    failed(tenant, demo_cluster, tenant.other_project, "outsider")
    shown = cli("reliability", "--days", "7")
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert "1 failed or lost attempts" in lines[0]
    assert lines[1].startswith("Lost to failures: 0.2 GPU-hours, ")
    assert lines[3].split() == ["CAUSE", "FAILURES"] and lines[4].split() == ["cuda_oom", "1"]
    assert lines[6].split()[:3] == ["PROJECT", "FAILURES", "GPU-H"] and lines[7].split()[:3] == ["vision", "1", "0.2"]
    body = cli("reliability", "--json").json()
    assert body["failures"] == 1 and body["by_project"][0]["gpu_hours_lost"] == pytest.approx(1 / 6, abs=0.002)


@pytest.mark.parametrize("argv, message", [(("--days", "0"), "not a positive number"),
                                            (("--days", "3", "--since", "2026-01-01T00:00:00Z"), "not both")])
def test_bad_arguments_are_usage_errors(cli, argv, message):
    shown = cli("reliability", *argv)
    assert shown.code != 0 and message in shown.err
