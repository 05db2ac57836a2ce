"""The demo's pool: `chat`, serving on two A100 nodes of its own added to the simulated cluster (rack-s1: the
training demo keeps its nodes), and one preemptible job that borrows it. Its demand is the demo service's replicas
(serving/demo.py), whose traffic follows the synthetic day generated here (never a copy of any trace), compressed
into DAY_SECONDS so `make run` shows the tide go out and come in within minutes."""

from __future__ import annotations

import math

from django.contrib.auth import get_user_model

from clusters.models import Cluster, Node
from clusters.services import node_save
from jobs.models import Job
from jobs.services import job_submit
from pools import services
from pools.models import Pool
from quotas.models import PriorityClass, ResourceFlavor
from tenancy.models import Project

NAME = "chat"
DAY_SECONDS = 1200.0  # one demo day: 20 minutes (demo only; production demand is what serving reports)
ACTOR = "seed_demo"
JOB = "tide-sweep"
RACK = "rack-s1"


def demand_share(hour: float) -> float:
    """Serving's share of its pool at a local hour: a night floor, a rise from 07:00 to a peak mid-afternoon and a
    fall until 23:00, with a little ripple (the shape of a chat service's day)."""
    share = 0.15
    if 7 <= hour < 23:
        share += 0.75 * math.sin(math.pi * (hour - 7) / 16)
    share += 0.03 * math.sin(2 * math.pi * hour / 8)
    return min(1.0, max(0.0, share))


def demo_hour(now: float) -> float:
    return (now % DAY_SECONDS) / DAY_SECONDS * 24


def seed_pool() -> Pool | None:
    """The demo pool (once), and its preemptible borrower when the demo has jobs."""
    cluster = Cluster.objects.filter(name="sim-1", backend=Cluster.Backend.SIMULATED).first()
    flavor = ResourceFlavor.objects.filter(name="nvidia-a100-40gb").first()
    if cluster is None or flavor is None:
        return None
    existing = set(cluster.nodes.values_list("name", flat=True))
    for i in (1, 2):
        if f"{RACK}-n{i}" not in existing:
            node_save(actor=ACTOR, node=Node(
                cluster=cluster, name=f"{RACK}-n{i}", flavor=flavor, devices=8, block="block-s", rack=RACK,
                arch=flavor.arch, cpu_millis=96000, memory_mib=1024 * 1024, position=100 + i))
    pool = Pool.objects.filter(name=NAME).first()
    if pool is None:
        pool = services.pool_save(actor=ACTOR, pool=Pool(
            name=NAME, cluster=cluster, flavor=flavor, node_pattern=f"{RACK}-*", headroom_percent=10,
            headroom_floor=1))
    return pool


def seed_borrower() -> int:
    """A preemptible elastic sweep that runs on what the pool lends (robotics may borrow 16 A100)."""
    if Job.objects.filter(name=JOB).exists():
        return 0
    alice = get_user_model().objects.filter(username="alice").first()
    robotics = Project.objects.filter(slug="robotics").first()
    if alice is None or robotics is None:
        return 0
    job_submit(actor=alice, project=robotics, spec={
        "name": JOB, "stage": "other", "launcher": "pytorch", "image": "ghcr.io/acme/trainer:2026.11",
        "command": ["python", "sweep.py"], "groups": [{"role": "worker", "replicas": 2, "devices": 8,
                                                       "min_replicas": 1,
                                                       "flavor": ResourceFlavor.objects.get(name="nvidia-a100-40gb")}],
        "priority_class": PriorityClass.objects.get(name="preemptible"), "duration": 3 * 3600,
        "max_runtime": 6 * 3600, "retry_limit": 2, "checkpoint_path": f"s3://acme-ckpt/robotics/{JOB}"})
    return 1

