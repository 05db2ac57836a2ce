"""Reads for clusters and nodes."""

from __future__ import annotations

from django.db.models import QuerySet

from clusters.models import Cluster, Node


def job_with_cluster(job_id: int):
    from jobs.models import Job

    return Job.objects.select_related("cluster", "project", "flavor").filter(pk=job_id).first()


def clusters_of(job) -> list[Cluster]:
    """The cluster a job's attempt ran on; a job already requeued has lost it, so ask every enabled backend."""
    if job.cluster is not None:
        return [job.cluster]
    return list(Cluster.objects.all())


def clusters() -> QuerySet[Cluster]:
    return Cluster.objects.all()


def nodes() -> QuerySet[Node]:
    return Node.objects.select_related("cluster", "flavor")


def occupancy_by_node(user) -> dict[tuple[int, str], list[dict]]:
    """Devices in use per (cluster id, node name), by project. Projects the user cannot see read "other"."""
    from jobs.models import Job
    from jobs.states import HOLDING
    from tenancy.selectors import project_ids_for_user

    visible = set(project_ids_for_user(user).values_list("id", flat=True))
    result: dict[tuple[int, str], list[dict]] = {}
    rows = Job.objects.filter(state__in=HOLDING, cluster__isnull=False).values_list(
        "cluster_id", "placement", "project_id", "project__slug", "id")
    for cluster_id, placement, project_id, slug, job_id in rows:
        mine = project_id in visible
        for a in placement:
            result.setdefault((cluster_id, a["node"]), []).append(
                {"project": slug if mine else "other", "job": job_id if mine else None, "devices": a["devices"]})
    return result
