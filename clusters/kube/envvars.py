"""Environment variables the platform owns, and the check the API serializer runs at submission."""

from __future__ import annotations

from collections.abc import Mapping

from core.k8snames import is_env_name

from .errors import RenderError, ReservedEnvError

# Set on every replica.
COMMON_ENV = frozenset({
    "TIDAL_JOB_ID", "TIDAL_JOB_NAME", "TIDAL_PROJECT", "TIDAL_ATTEMPT", "TIDAL_LAUNCHER",
    "TIDAL_ROLE", "TIDAL_REPLICA_INDEX", "TIDAL_POD_NAME", "TIDAL_NODE_NAME",
    "TIDAL_CHECKPOINT_PATH", "TIDAL_TRACKING_URL", "TIDAL_RUN_TOKEN",
    "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_DISABLE",
})
# Rendezvous: the Kubeflow PyTorchJob names plus torchrun's PET_* forms (torchrun reads PET_<FLAG>).
RENDEZVOUS_ENV = frozenset({
    "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "NODE_RANK", "NNODES", "NPROC_PER_NODE",
    "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
    # an elastic job's (launchers.elastic_env)
    "PET_RDZV_BACKEND", "PET_RDZV_ENDPOINT", "PET_RDZV_ID", "PET_MAX_RESTARTS",
})
MEGATRON_ENV = frozenset({"TENSOR_MODEL_PARALLEL_SIZE", "PIPELINE_MODEL_PARALLEL_SIZE", "DATA_PARALLEL_SIZE"})
DEEPSPEED_ENV = frozenset({"TIDAL_HOSTFILE", "ELASTIC_RUN_ID"})  # the elastic agent's rendezvous id
RAY_ENV = frozenset({"RAY_ADDRESS", "RAY_DASHBOARD_ADDRESS", "TIDAL_RAY_NODES"})

#: Every name the renderer may set, for any launcher. User env may not contain any of them.
RESERVED_ENV: frozenset[str] = COMMON_ENV | RENDEZVOUS_ENV | MEGATRON_ENV | DEEPSPEED_ENV | RAY_ENV
#: Whole namespaces the platform keeps for itself, and the one the kubelet fills in every container
#: (KUBERNETES_SERVICE_HOST, KUBERNETES_PORT_443_TCP...: how a pod finds the API server).
RESERVED_ENV_PREFIXES: tuple[str, ...] = ("TIDAL_", "PET_", "KUBERNETES_")

def is_reserved(name: str) -> bool:
    return name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIXES)


def check_user_env(env: Mapping[str, str]) -> None:
    """Raise :class:`ReservedEnvError` naming every reserved variable in ``env``, or
    :class:`RenderError` for a name Kubernetes would reject. The API serializer calls this at submission."""
    bad = [name for name in env if not is_env_name(name)]
    if bad:
        raise RenderError(f"invalid environment variable name(s): {', '.join(sorted(bad))}", field="env")
    reserved = [name for name in env if is_reserved(name)]
    if reserved:
        raise ReservedEnvError(reserved)
