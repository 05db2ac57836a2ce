"""Ready-made inputs: a scenario bundles a trace, a cluster shape and quotas; plus the Philly reference.

`partition_by_project` turns a pooled scenario into isolated partitions: each project gets nodes of a flavor
of its own (its guarantee / node size), its jobs ask for that flavor and it cannot borrow. That is how the
reference "per isolated virtual cluster" baselines are modelled: placement inside a partition never sees
another project's fragmentation, exactly like separate clusters, while one replay still runs them all. A
project without a quota has no partition: its jobs never start (see `partition_by_project`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from jobs.scheduling.model import Node, Project, Quota
from replay.cluster import ClusterShape, ConfigError, QuotaSet, uniform_cluster
from replay.importers import PHILLY_FLAVOR, PHILLY_NODE_GPUS, import_philly, import_philly_quotas
from replay.paths import trace_path
from replay.policies import PARTITIONED, canonical_name, get_policy
from replay.synthetic import GANG_SIZES, synthetic_trace
from replay.trace import Trace

PHILLY_WEEK = "philly_week_2017-10-16.csv"
PHILLY_DAY = "philly_day_2017-10-17.csv"
PHILLY_QUOTA = "philly_vc_quota.csv"


@dataclass(frozen=True)
class Scenario:
    trace: Trace
    cluster: ClusterShape
    quotas: QuotaSet
    name: str = ""


def projects_without_quota(trace: Trace, quotas: QuotaSet) -> list[str]:
    """Projects that submit jobs but hold no quota: on isolated partitions they get no nodes."""
    return sorted({j.project for j in trace.jobs} - {q.project for q in quotas.quotas})


def partition_by_project(scn: Scenario) -> Scenario:
    """Per project, whole nodes of a private flavor `<flavor>/<project>`; no borrowing.

    A project without a quota gets no partition: in the reference experiment a partition is the project's
    guarantee, so such a project owns no nodes and, with no borrowing, its jobs never start. They stay in the
    replay (asking for a private flavor no node offers) and are counted as never started, per project.
    """
    nodes: list[Node] = []
    quotas: list[Quota] = []
    node_size = {n.flavor: n.devices for n in scn.cluster.nodes}
    for q in scn.quotas.quotas:
        size = node_size.get(q.flavor)
        if size is None:
            raise ConfigError(f"the quota of project {q.project} names flavor {q.flavor!r}, which the cluster lacks")
        flavor = f"{q.flavor}/{q.project}"
        for i in range(q.guaranteed // size):
            nodes.append(Node(f"{q.project}-{i:03d}", flavor, size, size, cluster=q.project))
        quotas.append(Quota(q.project, flavor, q.guaranteed, borrow_limit=0, lend_limit=0))
    jobs = tuple(replace(j, flavor=f"{j.flavor}/{j.project}") for j in scn.trace.jobs)
    return Scenario(
        Trace(jobs, scn.trace.skipped, scn.trace.source),
        ClusterShape(tuple(nodes)),
        QuotaSet(tuple(quotas), tuple(Project(p.name, p.name, p.max_running_jobs) for p in scn.quotas.projects)),
        name=f"{scn.name} (partitioned)" if scn.name else "partitioned",
    )


def philly_scenario(*, scale: float = 0.25, trace_file: str = PHILLY_WEEK, borrowing: bool = True) -> Scenario:
    """Philly jobs over the 11 virtual clusters, guarantees = scaled node counts x 8, one pooled cluster
    of the guarantees' total size (704 GPUs at scale 0.25, 2,816 at 1.0)."""
    quotas = import_philly_quotas(trace_path(PHILLY_QUOTA), scale=scale, borrowing=borrowing)
    total = sum(q.guaranteed for q in quotas.quotas)
    cluster = uniform_cluster(total // PHILLY_NODE_GPUS, PHILLY_NODE_GPUS, PHILLY_FLAVOR)
    trace = import_philly(trace_path(trace_file), limits=cluster.limits())
    return Scenario(trace, cluster, quotas, name=f"philly {trace_file} x{scale:g}")


def one_tenant_scenario(n_jobs: int = 30_000, *, devices: int = 256, load: float = 0.75, seed: int = 0) -> Scenario:
    """One team alone on its cluster and guaranteed all of it (`devices` GPUs on 8-GPU nodes): mostly 1-GPU jobs
    and a few whole-node gangs of 32 and 64 GPUs (GANG_SIZES, a quarter of the work), Poisson arrivals offering
    `load` of the cluster, log-normal durations (median 20 min). Every job that does not fit waits on its own
    project's quota, so a gang's start depends only on what its reservation keeps from the small jobs."""
    trace = synthetic_trace(n_jobs, devices=devices, projects=1, load=load, median_duration=1200.0, sigma=1.0,
                            seed=seed, priorities=("normal",), sizes=GANG_SIZES)
    team = trace.jobs[0].project if trace.jobs else "proj-00"
    quotas = QuotaSet((Quota(team, "gpu", devices),), (Project(team, "org"),))
    return Scenario(trace, uniform_cluster(devices // 8, 8, "gpu"), quotas,
                    name=f"one tenant, {n_jobs} jobs at load {load:g} on {devices} GPUs (seed {seed})")


def is_partitioned(policy_name: str, partition: bool | None) -> bool:
    """Whether a policy replays on per-project partitions: `partition`, or when None the isolated baselines."""
    return canonical_name(policy_name) in PARTITIONED if partition is None else partition


def scenario_for_policy(scn: Scenario, policy_name: str, *, partition: bool | None = None) -> Scenario:
    """The input a policy is replayed on: isolated baselines on partitions when `partition` is None."""
    get_policy(canonical_name(policy_name))  # fail early on unknown names
    return partition_by_project(scn) if is_partitioned(policy_name, partition) else scn


# Reference figures of issue 5 (average queueing delay, average JCT; seconds), Philly week at 704 GPUs.
PHILLY_REFERENCE: dict[str, tuple[float, float]] = {
    "strict-fifo": (9882.0, 20348.0),
    "fifo-skip": (8028.0, 18494.0),
    "sjf": (5125.0, 15591.0),
    "pooled-fifo": (323.0, 10788.0),
}
