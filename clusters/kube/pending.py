"""Pending pods Tidal did not create that ask for devices, and the nodes that would admit them. Pure.

A pool counts them as serving's demand (a KServe or vLLM replica waiting for a GPU is serving that needs the pool's
devices now). Which nodes admit a pod is kept simple, what the kube-scheduler checks first:
- its `nodeSelector` labels all on the node;
- its required node affinity (`requiredDuringSchedulingIgnoredDuringExecution`): one term whose expressions all hold
  (In, NotIn, Exists, DoesNotExist, Gt, Lt);
- its tolerations cover the node's NoSchedule and NoExecute taints.
Free room, preferred affinity, pod (anti-)affinity and topology spread are not checked: a pending pod waits for
devices, which is what lending may have taken. A pod with neither a selector nor a required affinity admits any node:
it is marked `selector: False` and a pool counts it only when it opts in (`Pool.pending_without_selector`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .nodes import is_platform_pod, pod_requests

Labels = Mapping[str, str]


def _expression_holds(expr: Mapping[str, Any], labels: Labels) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), [str(v) for v in expr.get("values") or []]
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _affinity_terms(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return list(required.get("nodeSelectorTerms") or [])


def _tolerated(taint: Mapping[str, str], tolerations: Iterable[Mapping[str, Any]]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and str(t.get("value", "")) == str(taint.get("value", "")):
            return True
    return False


def admits(pod: Mapping[str, Any], labels: Labels, taints: Iterable[Mapping[str, str]]) -> bool:
    """Whether the pod's selector, required node affinity and tolerations let it run on a node with these labels and
    taints (see the module)."""
    spec = pod.get("spec") or {}
    if any(labels.get(k) != str(v) for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    terms = _affinity_terms(pod)
    if terms and not any(all(_expression_holds(e, labels) for e in term.get("matchExpressions") or [])
                         for term in terms):
        return False
    tolerations = spec.get("tolerations") or []
    return all(_tolerated(t, tolerations) for t in taints if t.get("effect") in ("NoSchedule", "NoExecute"))


def pending_foreign(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], instance: str,
                    device_resources: Iterable[str]) -> list[dict[str, Any]]:
    """Pods not bound to a node, phase Pending, not created by this Tidal instance, that ask for devices: each with
    the device resource and count it asks for and the names of the nodes that would admit it, sorted by pod."""
    resources = tuple(device_resources)
    node_facts = [(str((n.get("metadata") or {}).get("name", "")), (n.get("metadata") or {}).get("labels") or {},
                   (n.get("spec") or {}).get("taints") or []) for n in nodes]
    out = []
    for pod in pods:
        spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if spec.get("nodeName") or phase != "Pending" or is_platform_pod(pod, instance):
            continue
        requests = pod_requests(pod)
        asked = [(r, int(requests[r])) for r in resources if requests.get(r, 0) > 0]
        if not asked:
            continue
        resource, devices = asked[0]
        out.append({"pod": f"{meta.get('namespace', '')}/{meta.get('name', '')}", "resource": resource,
                    "devices": devices,
                    "nodes": sorted(name for name, labels, taints in node_facts if admits(pod, labels, taints)),
                    "selector": bool(spec.get("nodeSelector") or _affinity_terms(pod))})
    return sorted(out, key=lambda p: p["pod"])
