"""Importers from public traces into the replay formats.

- Philly (Pollux conversion): jobs with `submit_s_from_2017_10_01, duration_s, num_gpus, vc`; each virtual
  cluster (vc) becomes a project. Up to 8 GPUs is one replica, more is replicas of 8 (8-GPU nodes) plus one
  replica of the rest when the count is not a multiple of 8 (12 GPUs: 1 x 8 + 1 x 4).
- `philly_vc_quota.csv`: each vc's node count becomes its guarantee, scaled (0.25 = a quarter of the nodes).
- Alibaba 2023 GPU node list: a heterogeneous cluster shape, one flavor per GPU model.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

from jobs.scheduling.model import Node, Project, Quota
from replay.cluster import ClusterShape, QuotaSet
from replay.trace import FlavorLimits, SkipReport, Trace, TraceError, TraceJob, require_jobs, split_total

PHILLY_FLAVOR = "gpu"
PHILLY_NODE_GPUS = 8


def import_philly(
    path: str | Path,
    *,
    flavor: str = PHILLY_FLAVOR,
    limits: FlavorLimits | None = None,
    skip_invalid: bool = False,
    rebase: bool = True,
) -> Trace:
    """Read a Philly CSV of the Pollux conversion. `rebase` moves the first submit to t=0."""
    src = str(path)
    jobs: list[TraceJob] = []
    skipped = SkipReport()
    line = 1
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        for row in reader:
            line = reader.line_num
            try:
                try:
                    submit = float(row["submit_s_from_2017_10_01"])
                    duration = float(row["duration_s"])
                    gpus = int(row["num_gpus"])
                    vc = row["vc"].strip()
                except (KeyError, TypeError, ValueError) as exc:
                    raise TraceError(src, line, "malformed", f"cannot read row: {exc}") from None
                if duration < 0:
                    raise TraceError(src, line, "negative_duration", f"negative duration_s {duration:g}")
                if gpus <= 0:
                    raise TraceError(src, line, "malformed", f"num_gpus {gpus} must be positive")
                if limits is not None and flavor not in limits.node_devices:
                    raise TraceError(src, line, "unknown_flavor", f"the cluster has no flavor {flavor!r}")
                if limits is not None and gpus > limits.total_devices[flavor]:
                    raise TraceError(src, line, "too_large", f"{gpus} GPUs is more than the cluster has")
            except TraceError as err:
                if not skip_invalid:
                    raise
                skipped.add(err)
                continue
            # Philly's nodes had 8 GPUs: larger jobs took whole nodes and one more for the rest.
            devices, replicas, remainder = split_total(gpus, PHILLY_NODE_GPUS)
            jobs.append(TraceJob(row["job_id"], submit, duration, devices, replicas, flavor, vc, remainder=remainder))
    require_jobs(jobs, skipped, src, line)
    jobs.sort(key=lambda j: j.submit)
    if rebase and jobs:
        t0 = jobs[0].submit
        jobs = [_shift(j, -t0) for j in jobs]
    return Trace(tuple(jobs), skipped, src)


def _shift(j: TraceJob, dt: float) -> TraceJob:
    return replace(j, submit=j.submit + dt)


def philly_vc_nodes(path: str | Path, *, scale: float = 1.0) -> dict[str, int]:
    """Nodes per virtual cluster, scaled and rounded (at least one node each)."""
    out: dict[str, int] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            out[row["vc"].strip()] = max(1, round(int(row["nodes"]) * scale))
    return out


def import_philly_quotas(
    path: str | Path,
    *,
    scale: float = 1.0,
    flavor: str = PHILLY_FLAVOR,
    borrowing: bool = True,
    cohort: str = "philly",
) -> QuotaSet:
    """Guarantees from `philly_vc_quota.csv`: scaled node count x 8 GPUs per vc.

    With `borrowing` every vc may borrow up to the rest of the pooled cluster (all vcs share one cohort);
    without it the borrow limit is 0, so each vc is capped at its guarantee.
    """
    nodes = philly_vc_nodes(path, scale=scale)
    total = sum(nodes.values()) * PHILLY_NODE_GPUS
    quotas = []
    for vc, n in nodes.items():
        g = n * PHILLY_NODE_GPUS
        quotas.append(Quota(vc, flavor, g, borrow_limit=(total - g) if borrowing else 0))
    return QuotaSet(tuple(quotas), tuple(Project(vc, cohort) for vc in nodes))


def import_alibaba_nodes(path: str | Path, *, flavor_prefix: str = "", nodes_per_block: int = 0) -> ClusterShape:
    """Alibaba 2023 `openb_node_list_gpu_node.csv` as a cluster: flavor = GPU model, devices = GPUs.

    The list carries no topology; with `nodes_per_block` > 0 consecutive nodes of one model are grouped into
    synthetic blocks so topology-aware policies have something to work with.
    """
    nodes: list[Node] = []
    per_model: dict[str, int] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            gpus = int(row["gpu"])
            if gpus <= 0:
                continue
            model = flavor_prefix + row["model"].strip()
            i = per_model.get(model, 0)
            per_model[model] = i + 1
            block = f"{model}-b{i // nodes_per_block}" if nodes_per_block > 0 else ""
            nodes.append(Node(row["sn"].strip(), model, gpus, gpus, block=block))
    return ClusterShape(tuple(nodes))
