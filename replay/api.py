"""The functions the Django command, the API task and the what-if page call.

    trace = load_trace(path, cluster=cluster, skip_invalid=True)
    cluster = load_cluster(path)            # or ClusterShape(nodes) built from the inventory
    quotas = load_quotas(path)              # or QuotaSet(quotas, projects) from the configuration
    result = run(trace, cluster, quotas, "production", progress=cb)
    summary = summarize(result); write_outputs([result], out_dir); compare(before, after)

File formats are detected from the header: the replay trace format or a Philly CSV; a cluster file or the
Alibaba 2023 node list; a quota file or `philly_vc_quota.csv` (scaled by `quota_scale`).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from jobs.scheduling.model import Node, Policy, Quota
from replay import cluster as _cluster
from replay.cluster import ClusterShape, QuotaSet, uniform_cluster
from replay.engine import EngineOptions, ProgressFn, ReplayResult, run_replay
from replay.importers import import_alibaba_nodes, import_philly, import_philly_quotas
from replay.policies import canonical_name, get_policy
from replay.scenarios import Scenario, scenario_for_policy
from replay.trace import Trace, read_trace


def _header(path: str | Path) -> set[str]:
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.reader(f):
            if row and not row[0].lstrip().startswith("#"):
                return {c.strip() for c in row}
    return set()


def _is_csv(path: str | Path) -> bool:
    return Path(path).suffix.lower() not in (".yaml", ".yml")


def load_trace(path: str | Path, *, cluster: ClusterShape | None = None, skip_invalid: bool = False) -> Trace:
    """A trace file (replay format or Philly CSV), validated against `cluster` when given."""
    limits = cluster.limits() if cluster is not None else None
    if {"num_gpus", "vc", "submit_s_from_2017_10_01"} <= _header(path):
        return import_philly(path, limits=limits, skip_invalid=skip_invalid)
    return read_trace(path, limits=limits, skip_invalid=skip_invalid)


def load_cluster(path: str | Path) -> ClusterShape:
    """A cluster shape file (CSV/YAML) or the Alibaba 2023 GPU node list."""
    if _is_csv(path) and {"sn", "gpu", "model"} <= _header(path):
        return import_alibaba_nodes(path)
    return _cluster.load_cluster(path)


def load_quotas(path: str | Path, *, quota_scale: float = 1.0, borrowing: bool = True) -> QuotaSet:
    """A quota file (CSV/YAML) or `philly_vc_quota.csv` (guarantee = round(nodes x scale) x gpus per node)."""
    if _is_csv(path) and {"vc", "nodes", "gpus_per_node"} <= _header(path):
        return import_philly_quotas(path, scale=quota_scale, borrowing=borrowing)
    return _cluster.load_quotas(path)


def cluster_for_quotas(quotas: QuotaSet, node_devices: int = 8) -> ClusterShape:
    """A pooled cluster exactly the size of the guarantees, per flavor (when no cluster file is given)."""
    nodes: list[Node] = []
    for flavor in sorted({q.flavor for q in quotas.quotas}):
        total = sum(q.guaranteed for q in quotas.quotas if q.flavor == flavor)
        nodes.extend(uniform_cluster(-(-total // node_devices), node_devices, flavor, prefix=flavor).nodes)
    return ClusterShape(tuple(nodes))


def resolve_policy(policy: str | Policy, overrides: Mapping[str, Any] | None = None) -> Policy:
    """A named policy (see replay.policies.POLICIES) or a Policy, with field overrides applied."""
    base = get_policy(policy) if isinstance(policy, str) else policy
    return replace(base, **dict(overrides or {}))


def with_quota(quotas: QuotaSet, project: str, flavor: str, **changes: int | None) -> QuotaSet:
    """The what-if edit: a copy of `quotas` with one project's quota changed (added when absent)."""
    # `changes` are the quota's number fields (guaranteed, borrow_limit, lend_limit), which mypy cannot tell apart
    # from its names in a **dict: hence the ignores.
    out, found = [], False
    for q in quotas.quotas:
        if q.project == project and q.flavor == flavor:
            q, found = replace(q, **changes), True  # type: ignore[arg-type]
        out.append(q)
    if not found:
        out.append(Quota(project, flavor, **{"guaranteed": 0, **changes}))  # type: ignore[arg-type]
    return QuotaSet(tuple(out), quotas.projects)


def run(
    trace: Trace,
    cluster: ClusterShape,
    quotas: QuotaSet,
    policy: str | Policy = "production",
    *,
    options: EngineOptions | None = None,
    progress: ProgressFn | None = None,
    partition: bool | None = False,
    label: str = "",
) -> ReplayResult:
    """Replay one policy. `partition=None` puts the isolated baselines on per-project partitions (reference
    experiment); the default replays every policy on the cluster as given."""
    name = canonical_name(policy) if isinstance(policy, str) else (label or "custom")
    pol = resolve_policy(policy)
    scn = Scenario(trace, cluster, quotas)
    if isinstance(policy, str):
        scn = scenario_for_policy(scn, name, partition=partition)
    result = run_replay(scn.trace, scn.cluster, scn.quotas, pol, policy_name=name, options=options,
                        progress=progress)  # fmt: skip
    result.label = label
    return result


def run_many(
    trace: Trace,
    cluster: ClusterShape,
    quotas: QuotaSet,
    policies: Sequence[str | Policy],
    **kwargs: Any,
) -> list[ReplayResult]:
    """Replay several policies on the same inputs (the --compare list), in order."""
    return [run(trace, cluster, quotas, p, **kwargs) for p in policies]
