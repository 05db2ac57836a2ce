"""Reads of reliability, scoped to what the caller may see: diagnoses of their projects' attempts; the patterns and
the quarantine controls are staff's (nodes themselves are a catalog every signed-in user sees)."""

from __future__ import annotations

from django.db.models import QuerySet

from clusters.models import Node
from reliability.models import Diagnosis, FailurePattern, ProjectPolicy
from tenancy.selectors import project_ids_for_user


def diagnoses_for_user(user) -> QuerySet[Diagnosis]:
    if not user.is_authenticated:
        return Diagnosis.objects.none()
    return (Diagnosis.objects.filter(project_id__in=project_ids_for_user(user))
            .select_related("project__organization", "attempt", "job"))


def diagnosis_of_attempt(user, attempt_id: int) -> Diagnosis | None:
    return diagnoses_for_user(user).filter(attempt_id=attempt_id).first()


def diagnoses_of_job(job) -> QuerySet[Diagnosis]:
    """A job's diagnoses (the caller already holds the job, read through its scoped selector)."""
    return Diagnosis.objects.filter(job=job).select_related("attempt").order_by("attempt__number")


def patterns_for_user(user) -> QuerySet[FailurePattern]:
    if not (user.is_authenticated and user.is_staff):
        return FailurePattern.objects.none()
    return FailurePattern.objects.all()


def nodes_for_user(user) -> QuerySet[Node]:
    """Every node (the catalog is not tenant data), for the quarantine view and its staff actions."""
    if not user.is_authenticated:
        return Node.objects.none()
    return Node.objects.select_related("cluster", "flavor").order_by("cluster__name", "position", "name")


def quarantined_nodes() -> QuerySet[Node]:
    return Node.objects.filter(quarantined_at__isnull=False).select_related("cluster").order_by("-quarantined_at")


def policies_for_user(user) -> QuerySet[ProjectPolicy]:
    if not user.is_authenticated:
        return ProjectPolicy.objects.none()
    return ProjectPolicy.objects.filter(project_id__in=project_ids_for_user(user)).select_related("project")
