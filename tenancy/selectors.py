"""Reads scoped to what a user may see. API viewsets and pages get their querysets only from here."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from tenancy import authcache
from tenancy.models import ApiToken, AuditEntry, Membership, Organization, Project, Role, is_slug
from tenancy.permissions import User, remember_role, roles_at_least


def projects_for_user(user: User, *, min_role: str = Role.VIEWER) -> QuerySet[Project]:
    """Projects where the user holds at least `min_role`; platform staff see every project."""
    if not user.is_authenticated:
        return Project.objects.none()
    if user.is_staff:
        return Project.objects.select_related("organization")
    return Project.objects.filter(
        memberships__user=user, memberships__role__in=roles_at_least(min_role)
    ).select_related("organization")


def project_ids_for_user(user: User, *, min_role: str = Role.VIEWER) -> QuerySet:
    return projects_for_user(user, min_role=min_role).values("id")


def project_for_user(user: User, slug: str) -> Project | None:
    """The project of that slug if the user may see it, else None; found through the user's membership in one query,
    whose role is remembered for the rest of the request (`tenancy.permissions`): its role checks need no second
    query."""
    if not user.is_authenticated or not is_slug(slug):
        return None
    if user.is_staff:
        return Project.objects.filter(slug=slug).first()
    found = _membership(user, slug, project__slug=slug)
    return None if found is None else found[0]


def membership_of(user: User, project_id: int) -> tuple[Project, str] | None:
    """The project of that id and the user's role in it when the user is a member (staff are not asked: they act
    as owners everywhere), found as `project_for_user` finds a project by its slug."""
    return _membership(user, project_id, project_id=project_id)


def _membership(user: User, key: str | int, **project: Any) -> tuple[Project, str] | None:
    """(project, role) of the user's one membership in the project `project` names, from the per-process cache
    (tenancy/authcache.py) under `key` or read in one query; remembered for the rest of the request."""
    epoch = authcache.current_epoch()
    found = authcache.memberships.get((user.pk, key), epoch)
    if found is None:
        # One membership per user and project: ordered by key, not by the model's ordering (which joins).
        membership = Membership.objects.select_related("project").filter(user=user, **project).order_by("pk").first()
        if membership is None:
            return None
        found = (membership.project, membership.role)
        authcache.memberships.put((user.pk, key), epoch, found)
    remember_role(user, found[0], found[1])
    return found


def organizations_for_user(user: User) -> QuerySet[Organization]:
    if not user.is_authenticated:
        return Organization.objects.none()
    if user.is_staff:
        return Organization.objects.all()
    return Organization.objects.filter(projects__memberships__user=user).distinct()


def memberships_for_user(user: User) -> QuerySet[Membership]:
    return Membership.objects.filter(project__in=project_ids_for_user(user)).select_related("user", "project")


def users_sharing_a_project_with(user: User) -> QuerySet:
    """Users with a membership in one of the caller's projects: the only users the membership list can show."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(memberships__project__in=project_ids_for_user(user)).distinct()


def tokens_for_user(user: User) -> QuerySet[ApiToken]:
    if not user.is_authenticated:
        return ApiToken.objects.none()
    return ApiToken.objects.filter(user=user)


def audit_for_user(user: User) -> QuerySet[AuditEntry]:
    """Audit entries of the projects the user administers."""
    if not user.is_authenticated:
        return AuditEntry.objects.none()
    return AuditEntry.objects.filter(project__in=project_ids_for_user(user, min_role=Role.ADMIN)).select_related(
        "project"
    )


def default_project_for_user(user: User) -> Project | None:
    return projects_for_user(user).filter(archived=False).order_by("slug").first()


def active_users() -> QuerySet:
    """Users that can be added to a project by username (names are not secret inside the platform)."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(is_active=True)
