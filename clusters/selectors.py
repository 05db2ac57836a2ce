"""Reads for clusters and nodes."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from clusters.models import Cluster, FlavorRule, Node


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


def kubernetes_clusters() -> QuerySet[Cluster]:
    return Cluster.objects.filter(backend=Cluster.Backend.KUBERNETES)


def flavor_rules_for(cluster: Cluster) -> list[tuple[str, str]]:
    """(pattern, flavor name): the cluster's own rules by position, then the global ones."""
    rules = FlavorRule.objects.filter(Q(cluster=cluster) | Q(cluster__isnull=True)).select_related("flavor")
    ordered = sorted(rules, key=lambda r: (r.cluster_id is None, r.position, r.pk))
    return [(rule.pattern, rule.flavor.name) for rule in ordered]


def flavors():
    from quotas.models import ResourceFlavor

    return ResourceFlavor.objects.all()


def first_project():
    from tenancy.models import Project

    return Project.objects.select_related("organization").order_by("slug").first()


def projects_with_jobs():
    """Projects that have ever had a job (a project with jobs cannot be deleted): only their namespaces can hold
    objects Tidal created."""
    from jobs.models import Job
    from tenancy.models import Project

    return Project.objects.filter(pk__in=Job.objects.values("project_id")).select_related("organization")


def active_job_attempts() -> list[tuple[int, int]]:
    """(job id, attempt) of every job that is queued or holds capacity."""
    from jobs.models import Job
    from jobs.states import HOLDING, State

    return list(Job.objects.filter(state__in=[State.QUEUED, *HOLDING]).values_list("pk", "attempt"))


def events_with_logs(job):
    """The job's events that kept log lines, newest first."""
    from jobs.models import JobEvent

    return JobEvent.objects.filter(job=job, details__has_key="logs").order_by("-created_at", "-id")


def failure_counts(jobs: QuerySet) -> dict:
    """Failed attempts of `jobs` (a scoped queryset) counted by cause, and by rack and cause where the rack is known.

    Every failed attempt counts once (retried or final), from the transition event `job_attempt_failed` wrote."""
    from jobs.models import JobEvent
    from jobs.states import State

    events = JobEvent.objects.filter(job__in=jobs, kind="transition", to_state__in=[State.RETRYING, State.FAILED],
                                     details__has_key="cause").values_list("details", flat=True)
    by_cause: dict[str, int] = {}
    by_rack: dict[tuple[str, str], int] = {}
    for details in events:
        cause = str(details.get("cause") or "unknown")
        by_cause[cause] = by_cause.get(cause, 0) + 1
        rack = details.get("rack")
        if rack:
            by_rack[(str(rack), cause)] = by_rack.get((str(rack), cause), 0) + 1
    return {
        "total": sum(by_cause.values()),
        "by_cause": [{"cause": c, "count": n} for c, n in sorted(by_cause.items(), key=lambda x: (-x[1], x[0]))],
        "by_rack": [{"rack": r, "cause": c, "count": n}
                    for (r, c), n in sorted(by_rack.items(), key=lambda x: (-x[1], x[0]))],
    }
