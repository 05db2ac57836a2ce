"""Reads for clusters and nodes."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from clusters.models import Cluster, FlavorRule, Node
from core.digits import is_digits
from jobs.models import Attempt, Job
from jobs.selectors import attempts_with_jobs, held_placements
from quotas.models import ResourceFlavor
from tenancy.models import Project
from tenancy.selectors import project_ids_for_user


def clusters() -> QuerySet[Cluster]:
    return Cluster.objects.all()


def nodes() -> QuerySet[Node]:
    return Node.objects.select_related("cluster", "flavor")


def occupancy_by_node(user) -> dict[tuple[int, str], list[dict]]:
    """Devices in use per (cluster id, node name), by project. Projects the user cannot see read "other"."""
    visible = set(project_ids_for_user(user).values_list("id", flat=True))
    result: dict[tuple[int, str], list[dict]] = {}
    for cluster_id, placement, project_id, slug, job_id in held_placements():
        mine = project_id in visible
        for a in placement:
            result.setdefault((cluster_id, a["node"]), []).append(
                {"project": slug if mine else "other", "job": job_id if mine else None, "devices": a["devices"]})
    return result


def lost_nodes(cluster: Cluster, now: datetime | None = None) -> frozenset[str]:
    """Nodes of the cluster whose attempts are lost: not ready, and either gone from the cluster or marked so by an
    admin (no NotReady time: at once), or NotReady for TIDAL_NODE_LOST_GRACE already. A shorter NotReady is what
    the node-lifecycle controller shows of every node for a moment after an API-server outage."""
    grace_start = (now or timezone.now()) - timedelta(seconds=settings.TIDAL["NODE_LOST_GRACE"])
    return frozenset(Node.objects.filter(cluster=cluster, ready=False)
                     .filter(Q(not_ready_since__isnull=True) | Q(not_ready_since__lte=grace_start))
                     .values_list("name", flat=True))


def ended_attempts(cluster: Cluster, keys: Iterable[tuple[str, int]]) -> list[Attempt]:
    """The attempts of `cluster` that have ended among these (job label, attempt number) keys, as the objects
    Tidal created carry them, with what a backend needs to stop them."""
    wanted = {(int(job), number) for job, number in keys if is_digits(job)}
    if not wanted:
        return []
    candidates = attempts_with_jobs().filter(cluster=cluster, ended_at__isnull=False,
                                             job_id__in={job_id for job_id, _ in wanted})
    return [attempt for attempt in candidates if (attempt.job_id, attempt.number) in wanted]


def kubernetes_clusters() -> QuerySet[Cluster]:
    return Cluster.objects.filter(backend=Cluster.Backend.KUBERNETES)


def simulated_clusters() -> QuerySet[Cluster]:
    return Cluster.objects.filter(backend=Cluster.Backend.SIMULATED)


def flavor_rules_for(cluster: Cluster) -> list[tuple[str, str]]:
    """(pattern, flavor name): the cluster's own rules by position, then the global ones."""
    rules = FlavorRule.objects.filter(Q(cluster=cluster) | Q(cluster__isnull=True)).select_related("flavor")
    ordered = sorted(rules, key=lambda r: (r.cluster_id is None, r.position, r.pk))
    return [(rule.pattern, rule.flavor.name) for rule in ordered]


def flavors() -> QuerySet[ResourceFlavor]:
    return ResourceFlavor.objects.all()


def first_project() -> Project | None:
    return Project.objects.select_related("organization").order_by("slug").first()


def projects_with_jobs() -> QuerySet[Project]:
    """Projects that have ever had a job (a project with jobs cannot be deleted): only their namespaces can hold
    objects Tidal created."""
    return Project.objects.filter(pk__in=Job.objects.values("project_id")).select_related("organization")
