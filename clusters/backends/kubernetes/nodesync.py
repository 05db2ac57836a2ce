"""Node sync: the cluster's nodes and every pod on them (foreign pods take devices too) -> Node rows, each node's
flavor by the cluster's flavor rules; and the devices an attempt whose stop failed keeps taking until the next sync.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from clusters import selectors
from clusters.backends.kubernetes import clients, mapping
from clusters.kube.dispatch import attempt_key
from clusters.kube.errors import ApiError
from clusters.kube.nodes import NodeRow, inventory, platform_attempts
from clusters.kube.pending import pending_foreign
from clusters.models import Cluster, Node
from core import wakeup
from jobs.models import Attempt
from jobs.services import record_event
from quotas.models import Arch, ResourceFlavor

MAX_SKIPPED_SHOWN = 10  # nodes named in a sync report; the rest are counted


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # in the database, not in the cluster: marked not ready
    unmatched: dict[str, str] = field(default_factory=dict)  # not imported: node name -> why

    def skipped(self) -> str:
        """The nodes not imported and why, e.g. "gpu-9 (Tesla-T4: no flavor rule matches)"; empty when none."""
        shown = [f"{name} ({why})" for name, why in sorted(self.unmatched.items())[:MAX_SKIPPED_SHOWN]]
        more = len(self.unmatched) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")

    def summary(self) -> str:
        text = f"{len(self.created)} new, {len(self.updated)} updated, {len(self.gone)} gone (marked not ready)"
        if self.unmatched:
            text += f", {len(self.unmatched)} not imported: {self.skipped()}"
        return text


def _node_flavor(row: NodeRow, node: Node | None, flavors: Mapping[str, ResourceFlavor],
                 cpu_flavors: Mapping[str, ResourceFlavor]) -> tuple[ResourceFlavor | None, str]:
    """The flavor of a synced node, or None and why it is not imported.

    A rule's flavor wins (a node may gain or change accelerators). A known node no rule matches keeps its flavor:
    a GPU node whose device plugin restarts briefly shows no GPUs and must not turn into a CPU node. Only a new
    node without any accelerator (no product label, no device resource) becomes the CPU flavor of its arch.
    """
    flavor = flavors.get(row.flavor) if row.flavor else None
    if flavor is not None:
        return flavor, ""
    if node is not None:
        return node.flavor, ""
    if row.product:
        return None, f"{row.product}: no flavor rule matches"
    arch = row.arch or Arch.AMD64
    cpu = cpu_flavors.get(arch)
    if cpu is None:
        return None, f"no accelerator, and no CPU flavor (device resource empty or cpu) for {arch}"
    return cpu, ""


def _not_ready_since(row: NodeRow, node: Node | None, now: datetime) -> datetime | None:
    """When a node that is not Ready stopped being Ready: the API's time (so a node that came back and went again
    between two syncs starts its grace again), else when a sync first saw it so; never later than now."""
    if row.ready:
        return None
    seen_before = node.not_ready_since if node is not None and not node.ready else None
    return min(row.not_ready_since or seen_before or now, now)


def nodes_upsert(cluster: Cluster, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
                 ) -> SyncReport:
    """Node rows from the cluster's node and pod dicts, and the pending pods Tidal did not create that ask for
    devices (`Cluster.pending_foreign`: pools count them as demand). Nodes that left the cluster are marked not
    ready and kept (running jobs and history refer to them), without a NotReady time: their attempts are lost at
    once, where a node still there but NotReady loses them only once that has lasted TIDAL_NODE_LOST_GRACE. Nodes no
    flavor rule matches are reported, not imported."""
    pods, nodes = list(pods), list(nodes)
    rules = selectors.flavor_rules_for(cluster)
    flavors = {f.name: f for f in selectors.flavors()}
    cpu_flavors: dict[str, ResourceFlavor] = {}
    for flavor in sorted(flavors.values(), key=lambda f: f.name):
        if flavor.is_cpu:
            cpu_flavors.setdefault(flavor.arch, flavor)  # several for one arch: the first by name
    # CPU flavors name no device resource: counting `cpu` as one would give every node a "product".
    accelerators = sorted({f.device_resource for f in flavors.values() if not f.is_cpu})
    # Pods of attempts that ended but are still there (their stop failed, or they are terminating) take their
    # devices as foreign pods do, until they are gone.
    ended = {attempt_key(a.job_id, a.number) for a in selectors.ended_attempts(
        cluster, platform_attempts(pods, mapping.instance()))}
    settings = mapping.inventory_settings(cluster, rules, accelerators)
    rows = inventory(nodes, pods, settings, ended)
    pending = pending_foreign(nodes, pods, settings.instance, settings.device_resources)
    report = SyncReport()
    now = timezone.now()
    with transaction.atomic():
        existing = {n.name: n for n in Node.objects.select_for_update().filter(cluster=cluster)}
        position = max((n.position for n in existing.values()), default=0)
        seen = set()
        for row in rows:
            seen.add(row.name)
            node = existing.get(row.name)
            flavor, why = _node_flavor(row, node, flavors, cpu_flavors)
            if flavor is None:
                report.unmatched[row.name] = why
                continue
            # A CPU flavor's resource is not among the inventory's device keys: its nodes get 0 devices.
            fields = {**mapping.node_fields(row, flavor.device_resource),
                      "not_ready_since": _not_ready_since(row, node, now)}
            if node is None:
                position += 1
                Node.objects.create(cluster=cluster, name=row.name, flavor=flavor, position=position, **fields)
                report.created.append(row.name)
                continue
            changed = {k: v for k, v in {**fields, "flavor": flavor}.items() if getattr(node, k) != v}
            if changed:
                for k, v in changed.items():
                    setattr(node, k, v)
                node.save(update_fields=[*changed, "updated_at"])
                report.updated.append(row.name)
        for name, node in existing.items():
            if name not in seen and (node.ready or node.not_ready_since is not None):
                node.ready, node.not_ready_since = False, None
                node.save(update_fields=["ready", "not_ready_since", "updated_at"])
                report.gone.append(name)
        pending_changed = Cluster.objects.filter(pk=cluster.pk).values_list("pending_foreign", flat=True)[0] != pending
        Cluster.objects.filter(pk=cluster.pk).update(last_sync_at=timezone.now(), last_sync_error="",
                                                     last_sync_skipped=report.skipped()[:1000],
                                                     pending_foreign=pending)
    if report.created or report.gone or report.updated or pending_changed:
        transaction.on_commit(wakeup.wake_scheduler)
    return report


def cluster_sync_nodes(cluster: Cluster, *, client=None) -> SyncReport:
    try:
        client = client or clients.client_for(cluster)
        nodes = client.list_nodes()
        pods, _ = client.list("Pod")  # every namespace: devices of foreign pods are subtracted
    except ApiError as exc:
        Cluster.objects.filter(pk=cluster.pk).update(last_sync_error=str(exc)[:1000])
        raise
    return nodes_upsert(cluster, nodes, pods)


def hold_nodes_of(attempt: Attempt, why: str) -> None:
    """Count an ended attempt's devices as taken on its nodes (`Node.foreign_used`), as node sync counts the pods of
    ended attempts it finds on a node: its stop failed, so its pods may run on, and nothing must be placed there
    meanwhile. The next node sync sets what the pods it lists take (nothing once they are gone)."""
    per_node: Counter[str] = Counter()
    for row in attempt.placement:
        per_node[str(row["node"])] += int(row["devices"])
    for node, devices in per_node.items():
        Node.objects.filter(cluster=attempt.cluster, name=node).update(foreign_used=F("foreign_used") + devices)
    record_event(attempt.job, kind="note", actor="backend", attempt=attempt.number, reason=(
        f"stop of attempt {attempt.number} failed ({why}); its devices on {', '.join(sorted(per_node))} stay "
        "taken until its pods are gone"))
