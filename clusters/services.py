"""The audited catalog writes: clusters, nodes and flavor rules (validated, audited, waking the scheduler on commit,
whatever the door: the admin console, the API, the demo seed). What Tidal does on a Kubernetes cluster (node sync,
the resync, the orphan sweep, the connection test) is `clusters.backends.kubernetes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from django.db import transaction

from clusters.models import KUBERNETES_FIELDS, Cluster, FlavorRule, Node
from core import wakeup
from core.errors import DomainError
from core.parsers import BodyProblem, load_yaml
from tenancy.audit import delete_audited, save_audited

# ------------------------------------------------------------------------------------------------ credentials

def check_kubeconfig(text: str) -> None:
    """Raise DomainError unless `text` looks like a kubeconfig (a YAML mapping with clusters and users). Read first
    as request bodies are (core.parsers.load_yaml: aliases, nesting and integers bounded), then as the Kubernetes
    client will read it (yaml.safe_load, which raises ValueError, not a YAML error, on a date such as 2026-13-45:
    it answered 500). Read by safe_load alone, nested aliases were expanded whole."""
    try:
        data = load_yaml(text)
        yaml.safe_load(text)
    except (BodyProblem, yaml.YAMLError, ValueError) as exc:
        raise DomainError(f"The kubeconfig is not valid YAML: {exc}", field="kubeconfig") from None
    if not isinstance(data, dict) or not data.get("clusters") or not data.get("users"):
        raise DomainError("The kubeconfig needs `clusters`, `users` and a context.", field="kubeconfig")


CLUSTER_FIELDS = ("name", "backend", "description", "enabled", *KUBERNETES_FIELDS, "kubeconfig_encrypted")
NODE_FIELDS = ("name", "hostname", "flavor", "devices", "foreign_used", "cpu_millis", "memory_mib", "arch", "block",
               "rack", "switch", "taints", "cordoned", "ready", "position")
RULE_FIELDS = ("cluster", "pattern", "flavor", "position")


def _apply(obj: Any, values: Mapping[str, Any] | None) -> None:
    for name, value in (values or {}).items():
        setattr(obj, name, value)


@transaction.atomic
def cluster_save(*, actor: Any, cluster: Cluster, values: Mapping[str, Any] | None = None,
                 kubeconfig: str | None = None) -> Cluster:
    """Create or change a cluster. `kubeconfig`: None keeps the stored one, "" removes it, a text replaces it
    (encrypted at rest; the audit log says it changed, never what it holds)."""
    _apply(cluster, values)
    if kubeconfig is not None:
        if kubeconfig:
            check_kubeconfig(kubeconfig)
        cluster.set_kubeconfig(kubeconfig)
    save_audited(actor=actor, obj=cluster, fields=CLUSTER_FIELDS, hidden={"kubeconfig_encrypted": "kubeconfig"})
    transaction.on_commit(wakeup.wake_scheduler)
    return cluster


@transaction.atomic
def cluster_delete(*, actor: Any, cluster: Cluster) -> None:
    """Delete a cluster and its nodes; the attempts that ran there keep their placement, without the cluster."""
    delete_audited(actor=actor, obj=cluster, fields=("name", "backend"))
    transaction.on_commit(wakeup.wake_scheduler)


@transaction.atomic
def node_save(*, actor: Any, node: Node, values: Mapping[str, Any] | None = None) -> Node:
    """Create or change a node (by hand: a simulated cluster's inventory, or a cordon). Node sync writes the nodes
    of Kubernetes clusters itself (`nodes_upsert`). A node an admin marks not ready loses its attempts at once."""
    _apply(node, values)
    if node.ready:
        node.not_ready_since = None
    save_audited(actor=actor, obj=node, fields=NODE_FIELDS)
    transaction.on_commit(wakeup.wake_scheduler)
    return node


@transaction.atomic
def node_delete(*, actor: Any, node: Node) -> None:
    delete_audited(actor=actor, obj=node, fields=("name", "flavor", "devices"))
    transaction.on_commit(wakeup.wake_scheduler)


@transaction.atomic
def flavor_rule_save(*, actor: Any, rule: FlavorRule, values: Mapping[str, Any] | None = None) -> FlavorRule:
    """Create or change a rule mapping GPU products to a flavor (used by the next node sync)."""
    _apply(rule, values)
    save_audited(actor=actor, obj=rule, fields=RULE_FIELDS)
    return rule


@transaction.atomic
def flavor_rule_delete(*, actor: Any, rule: FlavorRule) -> None:
    delete_audited(actor=actor, obj=rule, fields=RULE_FIELDS)
