"""A small simulated cluster, flavors and quotas around the shared tenant fixtures."""

from __future__ import annotations

import pytest

from clusters.models import Cluster, Node
from jobs.services import job_submit
from quotas.models import PriorityClass, Quota, ResourceFlavor


@pytest.fixture
def inventory(tenant):
    """h100: 2 racks x 2 nodes x 8 devices in block-a; a100: 2 nodes x 8. Vision: 16 h100 guaranteed, borrow 8;
    a second project of the same organization (`speech`) holds 16 h100 guaranteed and lends them."""
    from tenancy.models import Membership, Project

    h100 = ResourceFlavor.objects.create(name="nvidia-h100-80gb", vendor="nvidia", device_resource="nvidia.com/gpu")
    a100 = ResourceFlavor.objects.create(name="nvidia-a100-40gb", vendor="nvidia", device_resource="nvidia.com/gpu")
    cluster = Cluster.objects.create(name="sim")
    position = 0
    for rack in ("r1", "r2"):
        for i in (1, 2):
            position += 1
            Node.objects.create(cluster=cluster, name=f"{rack}-n{i}", flavor=h100, devices=8, block="block-a",
                                rack=rack, position=position)
    for i in (1, 2):
        Node.objects.create(cluster=cluster, name=f"a-n{i}", flavor=a100, devices=8, rack="r3", position=10 + i)
    speech = Project.objects.create(organization=tenant.organization, name="Speech", slug="speech")
    Membership.objects.create(project=speech, user=tenant.users["owner"], role="owner")
    Quota.objects.create(project=tenant.project, flavor=h100, guaranteed=16, borrow_limit=8)
    Quota.objects.create(project=tenant.project, flavor=a100, guaranteed=8, borrow_limit=0)
    Quota.objects.create(project=speech, flavor=h100, guaranteed=16, borrow_limit=16)
    return {"h100": h100, "a100": a100, "cluster": cluster, "speech": speech}


def spec(flavor, *, replicas=1, devices=8, name="train", priority=None, **extra) -> dict:
    """A service-level job spec (the serializer's validated shape)."""
    body = {"name": name, "image": "ghcr.io/acme/train:1", "command": ["python", "train.py"],
            "groups": [{"role": "worker", "replicas": replicas, "devices": devices, "flavor": flavor}]}
    if priority:
        body["priority_class"] = PriorityClass.objects.get(name=priority)
    body.update(extra)
    return body


def submit(tenant, flavor, *, project=None, user="member", **kwargs):
    return job_submit(actor=tenant.users[user], project=project or tenant.project, spec=spec(flavor, **kwargs)).job


def api_body(flavor_name="nvidia-h100-80gb", *, project="vision", replicas=1, devices=8, **extra) -> dict:
    body = {"project": project, "name": "train", "image": "ghcr.io/acme/train:1", "command": ["python", "train.py"],
            "groups": [{"role": "worker", "replicas": replicas, "devices": devices, "flavor": flavor_name}]}
    body.update(extra)
    return body


@pytest.fixture
def cycle(django_capture_on_commit_callbacks):
    """One scheduler cycle with its after-commit work (dispatch, stop) run, as in production."""
    from jobs.loop import forget_forecasts, run_once

    forget_forecasts()

    def run():
        with django_capture_on_commit_callbacks(execute=True):
            return run_once()

    return run


def admit(job, cluster, nodes, *, devices=None, now=None):
    """Admit `job` through the state machine on `nodes` (one replica each), as the scheduler would."""
    from django.utils import timezone

    from jobs.lifecycle import Admission, transition_many

    each = devices if devices is not None else job.total_devices // len(nodes)
    placement = [{"role": "worker", "index": i, "node": node, "devices": each} for i, node in enumerate(nodes)]
    transition_many([Admission(job.pk, cluster.pk, placement)], now=now or timezone.now())
    job.refresh_from_db()
    return job


def run(job, cluster, nodes, **kwargs):
    """Admit, dispatch and run `job` through the state machine (all at `now` when given)."""
    from jobs.lifecycle import transition
    from jobs.states import State

    job = admit(job, cluster, nodes, **kwargs)  # with on-commit callbacks running, the dispatch claimed it already
    for state in (State.DISPATCHING, State.RUNNING)[1 if job.state == State.DISPATCHING else 0:]:
        transition(job, state, reason="test", actor="system", now=kwargs.get("now"))
    return job
