"""GPU telemetry of the simulated clusters, so `make run` shows it with no Prometheus.

Nothing runs on a simulated cluster; every few seconds this makes, for each attempt running there, the samples a
DCGM exporter would have given for each of its GPUs since the last ones, and stores them through the same
attribution (by the replica's pod name, as dcgm-exporter labels it) and storage as the Prometheus reader. Values
follow the job's simulated behaviour (tracking.demo's labels):
  - a busy job's GPUs read a high "utilization" (GPU_UTIL: some kernel ran) but a lower SM activity, as real ones do
    (Acme, NSDI'24: 98-99% utilization for 33-50% SM activity), with tensor activity, memory, power and temperature
    following it; per-job constants from the job id, noise from (job, GPU, second);
  - `sim.tidal.dev/anomaly: throughput`: the GPUs wait on input while the demo's throughput collapses;
  - `sim.tidal.dev/gpu-idle: "true"`: the GPUs idle from the start (a job that holds GPUs and does nothing), which
    the idle-GPU rule alerts on after its window.
NVLink and PCIe traffic follow each GPU's SM activity, each node's RDMA traffic the job's activity (no errors).
"""

from __future__ import annotations

import random
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from clusters.kube.render import replica_pod_name
from clusters.models import Cluster
from jobs.models import Attempt, Job
from jobs.states import State
from telemetry import attribution, store
from telemetry.fields import NODE, Sample
from telemetry.models import AttemptTelemetry
from tracking import demo

INTERVAL_SECONDS = 5.0
STEP = 5  # seconds between samples
MAX_SAMPLES = 120  # per GPU and tick (after a pause): ten minutes at most
IDLE_LABEL = "sim.tidal.dev/gpu-idle"
GIB_TOTAL = 80.0


def tick(now: datetime | None = None) -> int:
    """Make and store the samples due for every running attempt of a simulated cluster. Returns the points."""
    now = now or timezone.now()
    stored = 0
    for cluster in Cluster.objects.filter(backend=Cluster.Backend.SIMULATED):
        attempts = list(Attempt.objects.filter(cluster=cluster, ended_at=None, started_at__isnull=False,
                                               job__state=State.RUNNING).select_related("job").order_by("pk"))
        if attempts:
            stored += _tick_cluster(cluster, attempts, now)
    return stored


def _tick_cluster(cluster: Cluster, attempts: list[Attempt], now: datetime) -> int:
    last = dict(AttemptTelemetry.objects.filter(attempt__in=attempts).values_list("attempt_id", "last_at"))
    offsets = _device_offsets(attempts)
    made: list[Sample] = []
    end = int(now.timestamp()) // STEP * STEP
    for attempt in attempts:
        since = last.get(attempt.pk) or attempt.started_at
        first = max(int(since.timestamp()) // STEP * STEP + STEP, end - (MAX_SAMPLES - 1) * STEP)
        for timestamp in range(first, end + 1, STEP):
            made += samples_of(attempt, offsets, timestamp)
    if not made:
        return 0
    with transaction.atomic():
        found = attribution.Attribution(cluster, min(s.timestamp for s in made), end, slack=STEP)
        grouped, _ = attribution.group(found, made)
        return store.store(found.holders, grouped, now=now)


def _device_offsets(attempts: list[Attempt]) -> dict[tuple[int, int], int]:
    """Where each replica's devices start on its node: replicas on a node take its devices in attempt order."""
    used: dict[str, int] = {}
    offsets: dict[tuple[int, int], int] = {}
    for attempt in attempts:
        for place, row in enumerate(attempt.placement or []):
            node = str(row["node"])
            offsets[(attempt.pk, place)] = used.get(node, 0)
            used[node] = used.get(node, 0) + int(row["devices"])
    return offsets


def samples_of(attempt: Attempt, offsets: dict[tuple[int, int], int], timestamp: int) -> list[Sample]:
    """What DCGM would read from each GPU of the attempt at `timestamp`."""
    job: Job = attempt.job
    started = int(attempt.started_at.timestamp()) if attempt.started_at else timestamp
    seconds = max(0, timestamp - started)
    busy = _busy(job, seconds)
    shape = random.Random(job.pk)
    level, memory = shape.uniform(0.35, 0.65), shape.uniform(40.0, 75.0)
    out: list[Sample] = []
    for place, row in enumerate(attempt.placement or []):
        pod = replica_pod_name(job.pk, job.name, attempt.number, str(row["role"]), int(row["index"]))
        for local in range(int(row["devices"])):
            gpu = offsets.get((attempt.pk, place), 0) + local
            noise = random.Random(job.pk * 1_000_003 + gpu * 7_919 + timestamp)
            sm = min(1.0, max(0.0, (level if busy else 0.01) + noise.gauss(0, 0.03 if busy else 0.005)))
            utilization = min(100.0, max(0.0, noise.gauss(97, 1.5) if busy else noise.gauss(2, 1)))
            values = {"utilization": utilization, "sm_active": sm * 100, "tensor_active": sm * 60,
                      "memory_used_gib": memory if busy else 2.0, "memory_free_gib": GIB_TOTAL - (
                          memory if busy else 2.0),
                      "power_watts": 90 + 560 * sm, "temperature_c": 38 + 40 * sm + noise.gauss(0, 0.5),
                      "xid": 0.0, "nvlink_tx_gb_s": 120 * sm, "nvlink_rx_gb_s": 120 * sm,
                      "pcie_tx_gb_s": 2 + 6 * sm, "pcie_rx_gb_s": 4 + 12 * sm}
            uuid = f"GPU-sim-{row['node']}-{gpu}"
            out += [Sample(str(row["node"]), gpu, uuid, pod, "", suffix, timestamp, value)
                    for suffix, value in values.items()]
        rdma = 40 * (level if busy else 0.01)  # GB/s: a node's 400 Gb/s ports at the job's activity
        out += [Sample(str(row["node"]), NODE, "", "", "", suffix, timestamp, value)
                for suffix, value in (("rdma_tx_gb_s", rdma), ("rdma_rx_gb_s", rdma), ("rdma_rx_errors", 0.0))]
    return out


def _busy(job: Job, seconds: int) -> bool:
    labels = job.labels or {}
    if str(labels.get(IDLE_LABEL, "")).lower() in ("true", "1", "yes"):
        return False
    anomaly = demo.anomaly_of(labels)
    if anomaly is not None and anomaly[0] == "throughput":
        step = seconds * demo.STEPS_PER_SECOND
        return not anomaly[1] <= step < anomaly[1] + demo.COLLAPSE_STEPS
    return True
