"""Per-launcher pieces of a replica: rendezvous env, command line, ports. Pure; used by ``render``.

Conventions (read from Kubeflow PyTorchJob / Trainer v2, Volcano's pytorch/ray plugins and KubeRay):

* rank 0 is the first replica of the first replica group; its pod's DNS name through the headless
  Service (``<pod>.<service>.<namespace>.svc.<domain>``) is ``MASTER_ADDR`` / the Ray head;
* ``WORLD_SIZE``/``RANK`` follow the Kubeflow PyTorchJob convention (pods, not processes), so a
  one-process-per-pod script works; torchrun recomputes them per process from ``PET_*``;
* megatron's tensor x pipeline parallel size must divide the number of processes (pods x devices).
"""

from __future__ import annotations

import json
import posixpath
import shlex
from dataclasses import dataclass

from .errors import ParallelismError, RenderError
from .spec import RenderJob

RAY_GCS_PORT = 6379
RAY_DASHBOARD_PORT = 8265
RAY_CLIENT_PORT = 10001
DEEPSPEED_HOSTFILE_DIR = "/job"  # DeepSpeed's default --hostfile is /job/hostfile
DEEPSPEED_HOSTFILE = DEEPSPEED_HOSTFILE_DIR + "/hostfile"
RAY_WAIT_SECONDS = 600
# What the deepspeed launcher needs on each pod: the hostfile says how many processes every node runs, and --no_ssh
# (DeepSpeed >= 0.14.5) makes it start only its own node's processes (--node_rank) instead of ssh-ing into every
# host of the hostfile to start the whole job from each pod. Kubernetes expands $(VAR) from the container's env.
DEEPSPEED_NODE_FLAGS = (
    f"--hostfile={DEEPSPEED_HOSTFILE}", "--no_ssh", "--node_rank=$(NODE_RANK)", "--master_addr=$(MASTER_ADDR)",
    "--master_port=$(MASTER_PORT)",
)


@dataclass(frozen=True)
class Replica:
    """One pod of the attempt, with its place in the gang."""

    role: str
    index: int
    rank: int
    devices: int
    pod_name: str
    dns_name: str  # how the other replicas reach it (FQDN through the headless Service)
    # Its line of the DeepSpeed hostfile: its group's offset (the replicas every group before it may run) plus its
    # index. The rank of a rigid job; an elastic one's never changes with a resize, so a pod created by a grow finds
    # its line in the hostfile written at dispatch and no two pods share one.
    line: int = 0

    @property
    def nproc(self) -> int:
        return max(self.devices, 1)


def world_processes(job: RenderJob) -> int:
    return sum(group.replicas * max(group.devices, 1) for group in job.replica_groups)


def check_parallelism(job: RenderJob) -> None:
    if job.launcher != "megatron":
        return
    tp, pp = job.tensor_parallel, job.pipeline_parallel
    if tp < 1 or pp < 1:
        raise ParallelismError("tensor and pipeline parallel sizes must be at least 1", field="tensor_parallel")
    world = world_processes(job)
    if world % (tp * pp):
        raise ParallelismError(
            f"tensor parallel size {tp} x pipeline parallel size {pp} = {tp * pp} does not divide the "
            f"world size {world} (replicas x devices per replica)",
            field="tensor_parallel",
        )


def rendezvous_env(job: RenderJob, replica: Replica, master: Replica) -> dict[str, str]:
    """MASTER_*/WORLD_SIZE/RANK for every launcher, plus launcher specifics."""
    nnodes = job.total_replicas
    env = {
        "MASTER_ADDR": master.dns_name,
        "MASTER_PORT": str(job.master_port),
        "WORLD_SIZE": str(nnodes),
        "RANK": str(replica.rank),
        # DeepSpeed's runner reads its node's slots from this hostfile line (--node_rank); an elastic agent's training
        # ranks come from the rendezvous instead.
        "NODE_RANK": str(replica.line if job.launcher == "deepspeed" else replica.rank),
        "NNODES": str(nnodes),
        "NPROC_PER_NODE": str(replica.nproc),
        "PET_NNODES": str(nnodes),
        "PET_NPROC_PER_NODE": str(replica.nproc),
        "PET_NODE_RANK": str(replica.rank),
        "PET_MASTER_ADDR": master.dns_name,
        "PET_MASTER_PORT": str(job.master_port),
    }
    if job.elastic_nodes and job.launcher == "pytorch":
        env.update(elastic_env(job, master))
    if job.elastic_devices:
        low, high = job.elastic_devices
        env.update({"TIDAL_ELASTIC_MIN_GPUS": str(low), "TIDAL_ELASTIC_MAX_GPUS": str(high)})
    if job.launcher == "megatron":
        tp, pp = job.tensor_parallel, job.pipeline_parallel
        env["TENSOR_MODEL_PARALLEL_SIZE"] = str(tp)
        env["PIPELINE_MODEL_PARALLEL_SIZE"] = str(pp)
        env["DATA_PARALLEL_SIZE"] = str(world_processes(job) // (tp * pp))
    elif job.launcher == "deepspeed":
        env["TIDAL_HOSTFILE"] = DEEPSPEED_HOSTFILE
        if job.elastic_nodes:
            env["ELASTIC_RUN_ID"] = rendezvous_id(job)  # the elastic agent's c10d rendezvous, one per attempt
    elif job.launcher == "ray":
        env["RAY_ADDRESS"] = f"{master.dns_name}:{RAY_GCS_PORT}"
        env["RAY_DASHBOARD_ADDRESS"] = f"http://{master.dns_name}:{RAY_DASHBOARD_PORT}"
        # The head starts the entrypoint once this many nodes joined: an elastic job's minimum, whatever it runs by
        # the time the head's pod is (re)created; Ray Train grows into the nodes that join later.
        env["TIDAL_RAY_NODES"] = str(job.elastic_nodes[0] if job.elastic_nodes else nnodes)
    return env


def rendezvous_id(job: RenderJob) -> str:
    """One rendezvous per attempt: a retry never joins its predecessor's."""
    return f"tidal-{job.job_id}-{job.attempt}"


def elastic_env(job: RenderJob, master: Replica) -> dict[str, str]:
    """torchrun's elastic flags (it reads `--<flag>` from `PET_<FLAG>`): run on min..max nodes, meet through the c10d
    rendezvous hosted by rank 0's agent (reached through the headless Service; rank 0 is never the one a shrink
    removes), one rendezvous per attempt, and restart the workers at most `max_restarts` times on failures (a
    node joining or leaving restarts them at the new world size without counting)."""
    low, high = job.elastic_nodes or (job.total_replicas, job.total_replicas)
    return {
        "PET_NNODES": f"{low}:{high}",
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": f"{master.dns_name}:{job.master_port}",
        "PET_RDZV_ID": rendezvous_id(job),
        "PET_MAX_RESTARTS": str(job.max_restarts),
    }


def deepspeed_hostfile(replicas: list[Replica]) -> str:
    """DeepSpeed hostfile: one ``<host> slots=<devices>`` line per replica, in line order (an elastic job's: every
    replica up to its groups' maximum, running or not)."""
    return "".join(f"{r.dns_name} slots={r.nproc}\n" for r in replicas)


def _ray_resources(job: RenderJob, devices: int) -> str:
    if not devices:
        return "--num-gpus=0"
    if job.device_resource == "nvidia.com/gpu":
        return f"--num-gpus={devices}"
    name = job.device_resource.rsplit("/", 1)[-1]
    return "--resources=" + shlex.quote(json.dumps({name: devices}))


_RAY_WAIT = f"""python - <<'TIDAL_PY'
import os, sys, time
import ray
ray.init()
want, deadline = int(os.environ["TIDAL_RAY_NODES"]), time.time() + {RAY_WAIT_SECONDS}
while sum(1 for n in ray.nodes() if n["Alive"]) < want:
    if time.time() > deadline:
        sys.exit(f"tidal: timed out waiting for {{want}} ray nodes")
    time.sleep(2)
ray.shutdown()
TIDAL_PY
"""


def deepspeed_flags(job: RenderJob) -> list[str]:
    """The per-node flags; an elastic job's also start DeepSpeed's elastic agent, which meets the others in a c10d
    rendezvous at MASTER_ADDR:MASTER_PORT (rank 0's pod, never removed by a shrink) named ELASTIC_RUN_ID, admits
    min..max nodes and restarts training at the new world size when one joins or leaves."""
    if not job.elastic_nodes:
        return list(DEEPSPEED_NODE_FLAGS)
    low, high = job.elastic_nodes
    return [*DEEPSPEED_NODE_FLAGS, "--elastic_training", f"--min_elastic_nodes={low}", f"--max_elastic_nodes={high}"]


def _runs(command: list[str], program: str) -> bool:
    """Whether ``command`` starts ``program`` (by name or by path, e.g. /usr/local/bin/deepspeed)."""
    return bool(command) and posixpath.basename(command[0]) == program


def command_for(job: RenderJob, replica: Replica) -> tuple[list[str], list[str]]:
    """(command, args) of the replica's main container.

    pytorch/megatron: torchrun reads its per-node flags from the ``PET_*`` variables, so ``torchrun`` (the default)
    or a job command starting with it needs nothing more. deepspeed: the per-node flags are put right after
    ``deepspeed``, the default command or the first word of the job's own (a job's own flags come later and win).
    A command that starts neither launcher runs as given on every pod, one process per pod.
    """
    command, args = list(job.command), list(job.args)
    if job.launcher in ("pytorch", "megatron"):
        return (command or ["torchrun"]), args
    if job.launcher == "deepspeed":
        flags = deepspeed_flags(job)
        if not command:
            return ["deepspeed", *flags], args
        if _runs(command, "deepspeed"):
            return [command[0], *flags, *command[1:]], args
        return command, args
    if job.launcher == "command":
        if not command:
            raise RenderError("the command launcher needs a command", field="command")
        return command, args
    # ray
    resources = _ray_resources(job, replica.devices)
    if replica.rank == 0:
        entrypoint = job.ray_entrypoint or (shlex.join(command + args) if command else "")
        if not entrypoint.strip():
            raise RenderError("the ray launcher needs an entrypoint", field="ray_entrypoint")
        script = (
            "set -eu\n"
            f"ray start --head --port={RAY_GCS_PORT} --dashboard-host=0.0.0.0 "
            f"--dashboard-port={RAY_DASHBOARD_PORT} --ray-client-server-port={RAY_CLIENT_PORT} "
            f"--disable-usage-stats {resources}\n"
            f"{_RAY_WAIT}"
            f"{entrypoint}\n"
        )
    else:
        # `ray start --block` runs in the background so that the shell, PID 1 (which ignores a signal it has no trap
        # for), takes the SIGTERM of a shrink or a stop: the node leaves the Ray cluster at once, not at the grace's
        # SIGKILL, and Ray Train restarts its worker group on the nodes left.
        script = (
            "set -u\n"
            "trap 'ray stop; exit 0' TERM\n"
            f'until ray start --address="$RAY_ADDRESS" --disable-usage-stats {resources} --block & wait $!; '
            "do sleep 5; done\n"
        )
    return ["bash", "-c", script], []


def container_ports(job: RenderJob, replica: Replica) -> list[dict[str, object]]:
    if job.launcher == "ray":
        if replica.rank != 0:
            return []
        return [
            {"name": "gcs", "containerPort": RAY_GCS_PORT, "protocol": "TCP"},
            {"name": "dashboard", "containerPort": RAY_DASHBOARD_PORT, "protocol": "TCP"},
            {"name": "client", "containerPort": RAY_CLIENT_PORT, "protocol": "TCP"},
        ]
    return [{"name": "rdzv", "containerPort": job.master_port, "protocol": "TCP"}]


def service_ports(job: RenderJob) -> list[dict[str, object]]:
    if job.launcher == "ray":
        return [
            {"name": "gcs", "port": RAY_GCS_PORT, "targetPort": RAY_GCS_PORT, "protocol": "TCP"},
            {"name": "dashboard", "port": RAY_DASHBOARD_PORT, "targetPort": RAY_DASHBOARD_PORT, "protocol": "TCP"},
            {"name": "client", "port": RAY_CLIENT_PORT, "targetPort": RAY_CLIENT_PORT, "protocol": "TCP"},
        ]
    return [{"name": "rdzv", "port": job.master_port, "targetPort": job.master_port, "protocol": "TCP"}]
