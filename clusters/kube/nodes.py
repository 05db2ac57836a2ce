"""Node inventory rows from node dicts, minus the devices of pods Tidal did not create. Pure.

The flavor comes from the GPU product label that NVIDIA GPU Feature Discovery sets
(``nvidia.com/gpu.product``, e.g. ``NVIDIA-H100-80GB-HBM3``) through admin rules, an ordered list of
``(glob pattern, flavor)`` matched case-insensitively, first match wins. Nodes without the label but with
another device resource (e.g. ``huawei.com/Ascend910``) are matched by that resource name instead.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from . import names
from .quantity import parse_quantity

DEFAULT_TOPOLOGY_KEYS: Mapping[str, str] = {
    "block": "tidal.dev/block",
    "rack": "tidal.dev/rack",
    "switch": "tidal.dev/switch",
}
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class InventorySettings:
    device_resources: tuple[str, ...] = ("nvidia.com/gpu", "huawei.com/Ascend910")
    rdma_resource: str = "rdma/hca"
    flavor_rules: tuple[tuple[str, str], ...] = ()
    product_label: str = "nvidia.com/gpu.product"
    topology_keys: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_TOPOLOGY_KEYS))
    instance: str = "default"


@dataclass(frozen=True)
class NodeRow:
    name: str
    hostname: str  # kubernetes.io/hostname label, for the pod's node affinity
    flavor: str  # "" when no rule matched
    product: str
    arch: str
    allocatable: Mapping[str, int]  # devices per device resource (rdma included)
    used_by_others: Mapping[str, int]
    free: Mapping[str, int]
    # Allocatable cores / bytes minus what foreign pods and services' replicas request: what the scheduler may count
    # the platform's replicas' requests against. Never 0 when the node reports some (0 means "not modelled" to the
    # scheduler, which would then never limit): a node whose CPU foreign pods request entirely keeps 1 millicore, its
    # memory 1 MiB.
    cpu: Decimal
    memory: int
    topology: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...]
    cordoned: bool
    ready: bool
    not_ready_since: datetime | None = None  # not ready: when its Ready condition last changed, when the API says
    used_by_services: Mapping[str, int] = field(default_factory=dict)  # devices of Tidal's services' pods (serving.py)


def flavor_for(product: str, rules: Iterable[tuple[str, str]]) -> str:
    for pattern, flavor in rules:
        if product and fnmatch.fnmatchcase(product.lower(), pattern.lower()):
            return flavor
    return ""


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests of a pod as the scheduler counts them: max(sum of app containers + restartable
    init (sidecar) containers, largest regular init container), plus pod overhead."""
    spec = pod.get("spec") or {}

    def requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
        resources = container.get("resources") or {}
        # Extended resources may be given as limits only; requests then default to limits.
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {k: parse_quantity(v) for k, v in merged.items()}

    total: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for k, v in requests(container).items():
            total[k] = total.get(k, Decimal(0)) + v
    for container in spec.get("initContainers") or []:
        if container.get("restartPolicy") == "Always":
            for k, v in requests(container).items():
                total[k] = total.get(k, Decimal(0)) + v
        else:
            for k, v in requests(container).items():
                init_peak[k] = max(init_peak.get(k, Decimal(0)), v)
    out = {k: max(total.get(k, Decimal(0)), init_peak.get(k, Decimal(0))) for k in set(total) | set(init_peak)}
    for k, v in (spec.get("overhead") or {}).items():
        out[k] = out.get(k, Decimal(0)) + parse_quantity(v)
    return out


def is_platform_pod(pod: Mapping[str, Any], instance: str) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(names.LABEL_MANAGED) == "true" and labels.get(names.LABEL_INSTANCE) == names.label_value(
        instance)


def _live_on_node(pod: Mapping[str, Any]) -> str:
    """The node a pod holds requests on, or "" (not bound yet, or ended)."""
    node = (pod.get("spec") or {}).get("nodeName")
    phase = (pod.get("status") or {}).get("phase")
    return "" if not node or phase in TERMINAL_PHASES else str(node)


def _add_requests(usage: dict[str, dict[str, Decimal]], node: str, pod: Mapping[str, Any]) -> None:
    per_node = usage.setdefault(node, {})
    for k, v in pod_requests(pod).items():
        per_node[k] = per_node.get(k, Decimal(0)) + v


def service_usage(pods: Iterable[Mapping[str, Any]], instance: str) -> dict[str, dict[str, Decimal]]:
    """Requests per node of the live pods of this Tidal instance's inference services (clusters/kube/serving.py):
    they hold their devices as foreign pods do, but their pool counts them as its own demand, not as foreign."""
    usage: dict[str, dict[str, Decimal]] = {}
    for pod in pods:
        node = _live_on_node(pod)
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if node and names.LABEL_SERVICE in labels and is_platform_pod(pod, instance):
            _add_requests(usage, node, pod)
    return usage


def foreign_usage(pods: Iterable[Mapping[str, Any]], instance: str,
                  ended: Collection[tuple[str, int]] = ()) -> dict[str, dict[str, Decimal]]:
    """Requests per node of live pods the scheduler does not place: pods this Tidal instance did not create, and its
    pods of `ended` attempts ((job label, attempt) keys: attempts that ended while their pods are still there)."""
    usage: dict[str, dict[str, Decimal]] = {}
    for pod in pods:
        node = _live_on_node(pod)
        if not node or (is_platform_pod(pod, instance) and names.labelled_attempt(pod) not in ended):
            continue
        _add_requests(usage, node, pod)
    return usage


def _ready_condition(status: Mapping[str, Any]) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})


def _ready(status: Mapping[str, Any]) -> bool:
    return _ready_condition(status).get("status") == "True"


def node_is_ready(node: Mapping[str, Any]) -> bool:
    """Whether a node object (from list or get) reports Ready."""
    return _ready(node.get("status") or {})


def not_ready_since(node: Mapping[str, Any]) -> datetime | None:
    """When a node that is not Ready stopped being Ready: its Ready condition's lastTransitionTime (None when it is
    Ready, or the API gives no time: the node-lifecycle controller sets one when it marks a node NotReady or
    Unknown)."""
    status = node.get("status") or {}
    if _ready(status):
        return None
    text = str(_ready_condition(status).get("lastTransitionTime") or "")
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


MIN_CPU = Decimal("0.001")  # 1 millicore: what a node keeps when foreign pods request all of its CPU
MIN_MEMORY = Decimal(1024 * 1024)  # 1 MiB, likewise


def _left(allocatable: Decimal, requested: Decimal, floor: Decimal) -> Decimal:
    """What foreign pods leave of an allocatable amount: at least `floor` when there is any (see NodeRow.cpu)."""
    if allocatable <= 0:
        return Decimal(0)
    return max(allocatable - requested, floor)


def platform_attempts(pods: Iterable[Mapping[str, Any]], instance: str) -> set[tuple[str, int]]:
    """(job label, attempt) of every pod this Tidal instance created."""
    return {key for pod in pods if is_platform_pod(pod, instance) and (key := names.labelled_attempt(pod))}


def inventory(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]],
              settings: InventorySettings, ended: Collection[tuple[str, int]] = ()) -> list[NodeRow]:
    """One row per node, sorted by name. ``pods`` are all pods of the cluster (or at least the foreign ones and
    those of ``ended`` attempts, which count as the foreign ones do)."""
    pods = list(pods)
    usage = foreign_usage(pods, settings.instance, ended)
    services = service_usage(pods, settings.instance)
    device_keys = (*settings.device_resources, settings.rdma_resource)
    rows = []
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        status = node.get("status") or {}
        allocatable_raw = status.get("allocatable") or {}
        name = str(meta.get("name", ""))
        used, serving = usage.get(name, {}), services.get(name, {})
        allocatable = {k: int(parse_quantity(allocatable_raw[k])) for k in device_keys if k in allocatable_raw}
        used_devices = {k: int(used.get(k, 0)) for k in allocatable if used.get(k)}
        serving_devices = {k: int(serving.get(k, 0)) for k in allocatable if serving.get(k)}
        free = {k: max(v - used_devices.get(k, 0) - serving_devices.get(k, 0), 0) for k, v in allocatable.items()}
        product = labels.get(settings.product_label, "")
        if not product:
            product = next((k for k in settings.device_resources if allocatable.get(k)), "")
        cpu_allocatable = parse_quantity(allocatable_raw.get("cpu", "0"))
        memory_allocatable = parse_quantity(allocatable_raw.get("memory", "0"))
        cpu = _left(cpu_allocatable, used.get("cpu", Decimal(0)) + serving.get("cpu", Decimal(0)), MIN_CPU)
        memory = int(_left(memory_allocatable, used.get("memory", Decimal(0)) + serving.get("memory", Decimal(0)),
                           MIN_MEMORY))
        rows.append(NodeRow(
            name=name,
            hostname=labels.get("kubernetes.io/hostname", name),
            flavor=flavor_for(product, settings.flavor_rules),
            product=product,
            arch=labels.get("kubernetes.io/arch", ""),
            allocatable=allocatable,
            used_by_others=used_devices,
            used_by_services=serving_devices,
            free=free,
            cpu=cpu,
            memory=memory,
            topology={level: labels[key] for level, key in settings.topology_keys.items() if key in labels},
            taints=tuple({k: str(t.get(k, "")) for k in ("key", "value", "effect")}
                         for t in (node.get("spec") or {}).get("taints") or []),
            cordoned=bool((node.get("spec") or {}).get("unschedulable")),
            ready=_ready(status),
            not_ready_since=not_ready_since(node),
        ))
    return sorted(rows, key=lambda r: r.name)
