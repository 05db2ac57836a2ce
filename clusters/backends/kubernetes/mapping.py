"""Pure mapping between Tidal's models and the Kubernetes layer's dataclasses (``clusters.kube.spec``/``nodes``).

No queries here: callers pass loaded model instances (an attempt with its job's groups, flavor and project
prefetched), so the mapping is unit-tested on its own and the backend stays small.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from django.conf import settings

from clusters.kube import names
from clusters.kube.errors import RenderError
from clusters.kube.nodes import InventorySettings, NodeRow
from clusters.kube.spec import ClusterSettings, Placement, RenderJob, ReplicaGroup, ReplicaPlacement, Toleration
from clusters.models import Cluster
from core.k8snames import is_dns1123_label
from jobs import ports

MIB = 1024 * 1024


def instance() -> str:
    """This Tidal installation's name on shared clusters (label ``tidal.dev/instance``)."""
    return str(settings.TIDAL.get("KUBE_INSTANCE") or "default")


def namespace_for(cluster: Cluster, project_slug: str, organization_slug: str = "") -> str:
    """The project's namespace from the cluster's pattern, as a DNS-1123 label."""
    pattern = cluster.namespace_pattern or "tidal-{project}"
    try:
        raw = pattern.format(project=project_slug, organization=organization_slug)
    except (KeyError, IndexError, ValueError) as exc:
        raise RenderError(f"namespace pattern {pattern!r} of cluster {cluster.name} is invalid: {exc}",
                          field="namespace") from None
    namespace = names.slug(raw)[: names.MAX_NAME].strip("-")
    if not is_dns1123_label(namespace):
        raise RenderError(f"namespace {namespace!r} is not a DNS-1123 label", field="namespace")
    return namespace


def job_namespace(cluster: Cluster, job: Any) -> str:
    project = job.project
    organization = getattr(getattr(project, "organization", None), "slug", "")
    return namespace_for(cluster, project.slug, organization)


def _tolerations(raw: Iterable[Any]) -> tuple[Toleration, ...]:
    out = []
    for item in raw or ():
        if isinstance(item, str):
            out.append(Toleration(key=item))
        elif isinstance(item, Mapping) and item.get("key"):
            out.append(Toleration(key=str(item["key"]), operator=item.get("operator", "Exists"),
                                  value=str(item.get("value", "")), effect=item.get("effect", "NoSchedule")))
    return tuple(out)


def cluster_settings(cluster: Cluster, namespace: str) -> ClusterSettings:
    return ClusterSettings(
        namespace=namespace,
        image_pull_secret=cluster.image_pull_secret,
        nccl_socket_ifname=cluster.nccl_socket_ifname,
        nccl_extra_env={str(k): str(v) for k, v in (cluster.nccl_extra_env or {}).items()},
        rdma_resource=cluster.rdma_resource,
        gpu_tolerations=_tolerations(cluster.gpu_tolerations),
        termination_grace_seconds=cluster.termination_grace_seconds,
        default_shm_size=cluster.shm_size,
        instance=instance(),
        cluster_domain=cluster.cluster_domain,
    )


def _int_option(options: Mapping[str, Any], key: str, default: int = 1) -> int:
    value = options.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RenderError(f"launcher_options.{key} must be a positive integer", field=f"launcher_options.{key}")
    return value


def render_job(attempt: Any, namespace: str) -> RenderJob:
    """An attempt (its job's groups and flavor loaded) -> the renderer's RenderJob."""
    job = attempt.job
    options = job.launcher_options or {}
    extra = ports.env_for(attempt)
    # An elastic group runs the replicas its attempt holds now (admitted at its minimum, then grown or shrunk), by
    # their indexes, not its maximum.
    placed: dict[str, list[int]] = {}
    for row in attempt.placement or []:
        placed.setdefault(str(row["role"]), []).append(int(row["index"]))
    rows = list(job.groups.all())
    groups = tuple(
        ReplicaGroup(role=g.role, devices=g.devices, cpu=f"{g.cpu_millis}m", memory=f"{g.memory_mib}Mi",
                     rdma=1 if g.rdma else 0, max_replicas=g.replicas if g.min_replicas is not None else 0,
                     **({"replicas": g.replicas} if g.min_replicas is None or g.role not in placed else
                        {"replicas": len(placed[g.role]), "indexes": tuple(sorted(placed[g.role]))}))
        for g in rows
    )
    elastic = any(g.min_replicas is not None for g in rows)
    return RenderJob(
        job_id=job.pk,
        name=job.name,
        project=job.project.slug,
        namespace=namespace,
        attempt=attempt.number,
        launcher=job.launcher,
        image=job.image,
        replica_groups=groups,
        command=tuple(job.command or ()),
        args=tuple(job.args or ()),
        env={str(k): str(v) for k, v in (job.env or {}).items()},
        device_resource=job.flavor.device_resource,
        checkpoint_path=job.checkpoint_path,
        tensor_parallel=_int_option(options, "tensor_parallel"),
        pipeline_parallel=_int_option(options, "pipeline_parallel"),
        ray_entrypoint=str(options.get("entrypoint", "")),
        shm_size=str(options.get("shm_size", "")),
        permanent_exit_codes=frozenset(int(c) for c in job.permanent_exit_codes or ()),
        # The uid the image runs as: its pods then run as non-root and meet the `restricted` Pod Security Standard.
        run_as_user=_int_option(options, "run_as_user") if "run_as_user" in options else None,
        platform_env=extra.plain,
        secret_env=extra.secret,
        elastic_nodes=(sum(g.needed for g in rows), sum(g.replicas for g in rows)) if elastic else None,
        elastic_devices=(sum(g.needed * g.devices for g in rows), sum(g.replicas * g.devices for g in rows))
        if elastic else None,
        max_restarts=_int_option(options, "max_restarts", 3) if "max_restarts" in options else 3,
    )


def placement(attempt: Any, hostnames: Mapping[str, str] | None = None) -> Placement:
    """The attempt's placement rows ``{"role", "index", "node", "devices"}`` -> Placement. ``hostnames`` maps a
    node name to its ``kubernetes.io/hostname`` label when it differs."""
    hostnames = hostnames or {}
    replicas = []
    for row in attempt.placement or []:
        node = str(row["node"])
        hostname = hostnames.get(node, "")
        replicas.append(ReplicaPlacement(role=str(row["role"]), index=int(row["index"]), node=node,
                                         hostname="" if hostname == node else hostname))
    return Placement(tuple(replicas))


def render_inputs(attempt: Any, cluster: Cluster, hostnames: Mapping[str, str] | None = None
                  ) -> tuple[RenderJob, Placement, ClusterSettings]:
    namespace = job_namespace(cluster, attempt.job)
    return render_job(attempt, namespace), placement(attempt, hostnames), cluster_settings(cluster, namespace)


def replica_key(role: str, index: int) -> str:
    return f"{role}-{index}"


# ------------------------------------------------------------------------------------------------- inventory

def inventory_settings(cluster: Cluster, rules: Iterable[tuple[str, str]],
                       device_resources: Iterable[str] = ()) -> InventorySettings:
    resources = tuple(dict.fromkeys([*device_resources, *InventorySettings().device_resources]))
    return InventorySettings(
        device_resources=resources,
        rdma_resource=cluster.rdma_resource,
        flavor_rules=tuple(rules),
        topology_keys={"block": cluster.topology_block_key, "rack": cluster.topology_rack_key,
                       "switch": cluster.topology_switch_key},
        instance=instance(),
    )


def node_fields(row: NodeRow, device_resource: str) -> dict[str, Any]:
    """Node model fields (all but cluster, name, flavor, position) from an inventory row."""
    fields: dict[str, Any] = {
        "hostname": row.hostname if row.hostname != row.name else "",
        "product": row.product[:200],
        "devices": int(row.allocatable.get(device_resource, 0)),
        "foreign_used": int(row.used_by_others.get(device_resource, 0)),
        "serving_used": int(row.used_by_services.get(device_resource, 0)),
        "cpu_millis": int(max(row.cpu, Decimal(0)) * 1000),
        "memory_mib": int(row.memory // MIB),
        "block": row.topology.get("block", "")[:63],
        "rack": row.topology.get("rack", "")[:63],
        "switch": row.topology.get("switch", "")[:63],
        "taints": [dict(t) for t in row.taints],
        "cordoned": row.cordoned,
        "ready": row.ready,
    }
    if row.arch in ("amd64", "arm64"):
        fields["arch"] = row.arch
    return fields
