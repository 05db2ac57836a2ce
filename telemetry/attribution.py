"""Which attempt a GPU sample belongs to.

Tidal names its pods deterministically (`clusters.kube.render.replica_pod_name`: job id, job name, attempt number,
role and index), so a sample whose exporter named the pod is the attempt's whose replica pod that is, if the sample
falls inside the attempt's life. dcgm-exporter leaves the pod out at times (a GPU it could not map to a pod; an
exporter without the kubelet's pod-resources socket), so a sample without one falls back to the node and GPU index:
  1. a GPU of that node and index already seen under one of the attempts there (with a pod label, earlier) is that
     attempt's;
  2. else, the one attempt on the node at that time whose replicas there hold all the node's GPUs.
Anything else is not attributed (two attempts share the node and the exporter says not which holds which GPU: the
placement records how many devices a replica holds on a node, not which) and is counted as such, never guessed.

A node-level sample (RDMA counters: of the node, not of a GPU) goes to every attempt alive on the node at its time:
attempts sharing a node share its network, and each sees the node's figure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from clusters.backends.kubernetes.mapping import job_namespace
from clusters.kube.errors import RenderError
from clusters.kube.render import replica_pod_name
from clusters.models import Cluster, Node
from jobs.models import Attempt
from telemetry.fields import NODE, Sample
from telemetry.models import AttemptGpu, StagedPoints


@dataclass
class Holder:
    """An attempt as attribution sees it: its times (Unix seconds) and what it holds where."""

    attempt_id: int
    job_id: int
    project_id: int
    number: int
    admitted: int
    ended: int | None
    namespace: str
    nodes: dict[str, int]  # node -> devices its replicas hold there
    order: dict[str, int]  # node -> its first replica's place in the placement (ordinals follow it)
    known: dict[tuple[str, int], int] = field(default_factory=dict)  # (node, gpu) -> ordinal
    rows: dict[tuple[str, int], int] = field(default_factory=dict)  # (node, gpu) -> its AttemptGpu's id
    latest: dict[tuple[str, int], datetime | None] = field(default_factory=dict)  # (node, gpu) -> its last_at

    def alive(self, timestamp: int, slack: int) -> bool:
        return self.admitted <= timestamp and (self.ended is None or timestamp <= self.ended + slack)


class Attribution:
    """The attempts of one cluster over a window, indexed by pod name and by node."""

    def __init__(self, cluster: Cluster, start: int, end: int, *, slack: int = 0) -> None:
        self.slack = slack
        self.by_pod: dict[str, Holder] = {}
        self.by_node: dict[str, list[Holder]] = {}
        nodes = Node.objects.filter(cluster=cluster).values_list("name", "hostname", "devices")
        self.node_devices = {name: devices for name, _, devices in nodes}
        self.node_of_host = {hostname: name for name, hostname, _ in nodes if hostname}
        self.holders: dict[int, Holder] = {}
        attempts = (Attempt.objects.filter(cluster=cluster, admitted_at__lte=_moment(end))
                    .exclude(ended_at__lt=_moment(start - slack))
                    .select_related("job__project__organization"))
        for attempt in attempts:
            self._add(cluster, attempt)
        # An attempt whose end was recorded after a read staged its points, but dated before this window, holds
        # none of its samples; it is here so that the store writes what it staged (it ended) instead of leaving it.
        for attempt in (Attempt.objects.filter(cluster=cluster, pk__in=StagedPoints.objects.values("attempt_id"))
                        .exclude(pk__in=list(self.holders)).select_related("job__project__organization")):
            self._add(cluster, attempt)
        for attempt_id, node, gpu, ordinal, pk, last_at in AttemptGpu.objects.filter(
                attempt_id__in=list(self.holders)).values_list("attempt_id", "node", "gpu", "ordinal", "pk", "last_at"):
            holder = self.holders[attempt_id]
            holder.known[(node, gpu)], holder.rows[(node, gpu)], holder.latest[(node, gpu)] = ordinal, pk, last_at

    def _add(self, cluster: Cluster, attempt: Attempt) -> None:
        job = attempt.job
        try:
            namespace = job_namespace(cluster, job) if cluster.backend == Cluster.Backend.KUBERNETES else ""
        except RenderError:
            namespace = ""
        holder = Holder(attempt.pk, job.pk, job.project_id, attempt.number, int(attempt.admitted_at.timestamp()),
                        int(attempt.ended_at.timestamp()) if attempt.ended_at else None, namespace, {}, {})
        for place, row in enumerate(attempt.placement or []):
            node = str(row["node"])
            holder.nodes[node] = holder.nodes.get(node, 0) + int(row["devices"])
            holder.order.setdefault(node, place)
            pod = replica_pod_name(job.pk, job.name, attempt.number, str(row["role"]), int(row["index"]))
            self.by_pod[pod] = holder
        for node in holder.nodes:
            self.by_node.setdefault(node, []).append(holder)
        self.holders[attempt.pk] = holder

    def node_name(self, sample_node: str) -> str:
        """The inventory's name of the node the exporter names (its hostname label may differ from the name)."""
        return str(self.node_of_host.get(sample_node, sample_node))

    def on_node(self, sample: Sample) -> list[Holder]:
        """The attempts alive on the sample's node at its time."""
        return [h for h in self.by_node.get(self.node_name(sample.node), ()) if h.alive(sample.timestamp, self.slack)]

    def holder_of(self, sample: Sample) -> Holder | None:
        if sample.pod:
            holder = self.by_pod.get(sample.pod)
            if holder is None or not holder.alive(sample.timestamp, self.slack):
                return None  # not a Tidal pod, or one of an attempt outside its life
            if sample.namespace and holder.namespace and sample.namespace != holder.namespace:
                return None  # another installation's pod of the same name
            return holder
        node = self.node_name(sample.node)
        alive = self.on_node(sample)
        seen = [h for h in alive if (node, sample.gpu) in h.known]
        if len(seen) == 1:
            return seen[0]
        if len(alive) == 1 and alive[0].nodes[node] >= self.node_devices.get(node, 0):
            return alive[0]
        return None


def _moment(timestamp: int) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


def group(attribution: Attribution, samples: Iterable[Sample]) -> tuple[dict[int, list[Sample]], int]:
    """Samples per attempt id (a node-level one to each attempt on the node), and how many went to none."""
    found: dict[int, list[Sample]] = {}
    missed = 0
    for sample in samples:
        if sample.gpu == NODE:
            holders = attribution.on_node(sample)
        else:
            holder = attribution.holder_of(sample)
            holders = [holder] if holder is not None else []
        if not holders:
            missed += 1
        for holder in holders:
            found.setdefault(holder.attempt_id, []).append(sample)
    return found, missed
