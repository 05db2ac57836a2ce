"""Since when capacity and guarantees existed, for the analyses that measure against them (quota efficiency, the
cluster's utilization): a range starting before the installation, or before a node or a quota was added, must not
count idle devices that were not there yet (a demo minutes old showed a month of idle guarantees).

Neither nodes nor quotas keep a creation time; the records that define them do:

- a quota: its `quota.create` entry in the audit log (every door writes quotas through `quotas.services`), else its
  project's creation (a quota never precedes its project);
- a node: its `node.create` audit entry (added by hand or by seeding), else its cluster's creation (node sync adds
  the nodes it finds without an entry, right after the cluster is added).

What changed afterwards has no history: a guarantee raised or a node resized counts as if it had always been the
current one since that start."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from django.db.models import Min

from tenancy.models import AuditEntry


def _created(action: str, target_type: str) -> dict[str, datetime]:
    """The first `action` audit entry of each object of `target_type` it names (one row per object ever created
    through a service: far fewer than the audit log, and no list of ids to bind)."""
    entries = (AuditEntry.objects.filter(action=action, target_type=target_type).values("target_id")
               .annotate(first=Min("created_at")).values_list("target_id", "first"))
    return dict(entries)


def quota_starts(quotas: Collection[tuple[int, datetime]]) -> dict[int, int]:
    """(quota id, its project's creation) -> epoch seconds from which each quota's guarantee counts."""
    recorded = _created("quota.create", "quotas.Quota")
    return {pk: int(recorded.get(str(pk), project_created).timestamp()) for pk, project_created in quotas}


def node_starts(nodes: Collection[tuple[int, datetime]]) -> dict[int, int]:
    """(node id, its cluster's creation) -> epoch seconds from which each node's devices count."""
    recorded = _created("node.create", "clusters.Node")
    return {pk: int(recorded.get(str(pk), cluster_created).timestamp()) for pk, cluster_created in nodes}
