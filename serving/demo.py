"""The demo's service: `chat-llm` in project vision, on the demo pool `chat` (pools/demo.py), whose requests/s
follow the pool demo's synthetic day (time compressed: a day in DAY_SECONDS). So in `make run` the service scales
with the day, its replicas are the pool's demand, and the tide on the Pools page is the service's."""

from __future__ import annotations

import time

from clusters.models import Cluster
from pools.demo import NAME as POOL
from pools.demo import demand_share, demo_hour
from pools.models import Pool
from serving import services
from serving.models import Service
from tenancy.models import Project

NAME = "chat-llm"
PROJECT = "vision"
ACTOR = "seed_demo"
TARGET = 50.0  # requests/s one replica carries
PEAK = 8 * TARGET  # requests/s with every device of the pool busy (8 replicas of 2 devices)


def seed_service() -> Service | None:
    """The demo service (once), when the demo pool and project exist."""
    existing: Service | None = Service.objects.filter(name=NAME, project__slug=PROJECT).first()
    if existing is not None:
        return existing
    pool = Pool.objects.filter(name=POOL).first()
    project = Project.objects.filter(slug=PROJECT).first()
    if pool is None or project is None:
        return None
    created: Service = services.service_create(actor=ACTOR, project=project, values={
        "name": NAME, "pool": pool, "image": "ghcr.io/acme/vllm-chat:2026.11",
        "command": ["python", "-m", "vllm.entrypoints.openai.api_server"], "args": ["--model", "acme/chat-7b"],
        "port": 8000, "devices_per_replica": 2, "min_replicas": 1, "max_replicas": 8, "target_per_replica": TARGET,
        "metric": Service.Metric.REQUESTS_PER_SECOND, "latency_slo_ms": 800})
    return created


def traffic() -> None:
    """Push the demo service's requests/s for this moment of the demo day (simulated cluster only)."""
    service = Service.objects.filter(name=NAME, project__slug=PROJECT,
                                     pool__cluster__backend=Cluster.Backend.SIMULATED).first()
    if service is not None:
        services.metric_set(service=service, value=round(PEAK * demand_share(demo_hour(time.time())), 1))
