"""Plain frozen dataclasses the Django adapter fills from its models; the renderer reads nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Launcher = Literal["pytorch", "deepspeed", "megatron", "ray", "command"]
LAUNCHERS: tuple[str, ...] = ("pytorch", "deepspeed", "megatron", "ray", "command")


@dataclass(frozen=True)
class ReplicaGroup:
    """Replicas of one role. ``devices`` and ``rdma`` are counts per replica (0 = none)."""

    role: str
    replicas: int
    devices: int = 0
    cpu: str = "1"
    memory: str = "4Gi"
    rdma: int = 0
    # The replicas' indexes when they are not 0..replicas-1: an elastic group after a resize (its attempt's
    # placement; a shrink off a lost node may leave a gap). Empty: 0..replicas-1.
    indexes: tuple[int, ...] = ()
    # An elastic group's maximum (0: a rigid group): the replicas it may grow to, each with its own line of the
    # DeepSpeed hostfile from the start (launchers.Replica.line).
    max_replicas: int = 0

    @property
    def replica_indexes(self) -> tuple[int, ...]:
        return self.indexes or tuple(range(self.replicas))

    @property
    def slots(self) -> int:
        """Replicas the group may ever run in this attempt: its maximum when elastic."""
        return self.max_replicas or self.replicas


@dataclass(frozen=True)
class RenderJob:
    """One attempt of an admitted job, as the renderer needs it.

    ``replica_groups`` are ordered: ranks are assigned in that order, so the first replica of the first
    group is rank 0 (the rendezvous master, the DeepSpeed first host, the Ray head).
    """

    job_id: int | str
    name: str
    project: str
    namespace: str
    attempt: int
    launcher: Launcher
    image: str
    replica_groups: tuple[ReplicaGroup, ...]
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    device_resource: str = "nvidia.com/gpu"
    checkpoint_path: str = ""
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    ray_entrypoint: str = ""
    # Variables apps above jobs give the attempt's process (jobs.ports.env_for): plain ones as literals, secret
    # ones (tracking's run token) only through the attempt's Secret, never in the pod spec.
    platform_env: Mapping[str, str] = field(default_factory=dict)
    secret_env: Mapping[str, str] = field(default_factory=dict)
    shm_size: str = ""
    master_port: int = 29500
    permanent_exit_codes: frozenset[int] = frozenset()
    # The non-root uid the job's image runs as. Given, the pods run as it with runAsNonRoot and meet the
    # `restricted` Pod Security Standard; unknown, the image's own user is kept (it may be root), which `baseline`
    # allows and `restricted` does not.
    run_as_user: int | None = None
    # Elastic (pytorch, deepspeed, ray): the job runs on min..max pods, which join and leave its rendezvous (torchrun's
    # or DeepSpeed's elastic agent's c10d one) or its Ray cluster (launchers.rendezvous_env). None: a fixed world size.
    elastic_nodes: tuple[int, int] | None = None
    # The devices of an elastic job at min and at max pods (TIDAL_ELASTIC_MIN_GPUS/MAX_GPUS): what DeepSpeed's
    # `elasticity` config and Ray Train's num_workers=(min, max) are given.
    elastic_devices: tuple[int, int] | None = None
    max_restarts: int = 3  # torchrun --max-restarts of an elastic job: failed restarts before the pod gives up

    @property
    def total_replicas(self) -> int:
        return sum(group.replicas for group in self.replica_groups)


@dataclass(frozen=True)
class ReplicaPlacement:
    """Where the scheduler put one replica. ``hostname`` is the node's ``kubernetes.io/hostname`` label
    when it differs from the node name (some clouds); empty means "same as node"."""

    role: str
    index: int
    node: str
    hostname: str = ""


@dataclass(frozen=True)
class Placement:
    replicas: tuple[ReplicaPlacement, ...]

    def node_for(self, role: str, index: int) -> ReplicaPlacement | None:
        for replica in self.replicas:
            if replica.role == role and replica.index == index:
                return replica
        return None


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: Literal["Exists", "Equal"] = "Exists"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"

    def to_dict(self) -> dict[str, str]:
        out = {"key": self.key, "operator": self.operator}
        if self.operator == "Equal":
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        return out


DEFAULT_GPU_TOLERATIONS: tuple[Toleration, ...] = (
    Toleration(key="nvidia.com/gpu"),
    Toleration(key="huawei.com/Ascend910"),
)


@dataclass(frozen=True)
class ClusterSettings:
    """Per-cluster rendering settings (admin-defined on the cluster record).

    ``instance`` is written on every object as ``tidal.dev/instance`` so two Tidal installations can share a
    cluster without sweeping each other's objects.
    """

    namespace: str = "tidal"
    image_pull_secret: str = ""
    nccl_socket_ifname: str = "eth0"
    nccl_extra_env: Mapping[str, str] = field(default_factory=dict)
    rdma_resource: str = "rdma/hca"
    gpu_tolerations: tuple[Toleration, ...] = DEFAULT_GPU_TOLERATIONS
    termination_grace_seconds: int = 30
    default_shm_size: str = "16Gi"
    instance: str = "default"
    cluster_domain: str = "cluster.local"
