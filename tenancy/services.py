"""Writes for tenancy: organizations, projects, memberships and API tokens. Each is atomic and audited, whichever
door it came in by (API, pages, admin console)."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from core import wakeup
from core.errors import Conflict, DomainError, Forbidden
from tenancy.audit import audit_record, delete_audited, save_audited
from tenancy.models import ApiToken, Membership, Organization, Project, Role, hash_token
from tenancy.permissions import require_role

TOKEN_PREFIX = "tdl_"  # noqa: S105  (the visible prefix of every token, not a secret)


ORGANIZATION_FIELDS = ("name", "slug")
PROJECT_FIELDS = ("organization", "name", "slug", "description", "max_running_jobs", "artifact_quota_bytes",
                  "elastic_jobs")
SCHEDULING_FIELDS = frozenset({"max_running_jobs"})  # what the scheduler reads of a project


@transaction.atomic
def organization_save(*, actor: Any, organization: Organization, values: dict[str, Any] | None = None) -> Organization:
    """Create or rename an organization (platform staff, in the admin console)."""
    for name, value in (values or {}).items():
        setattr(organization, name, value)
    save_audited(actor=actor, obj=organization, fields=ORGANIZATION_FIELDS)
    return organization


@transaction.atomic
def organization_delete(*, actor: Any, organization: Organization) -> None:
    """Delete an organization without projects (its projects protect it: a 409)."""
    delete_audited(actor=actor, obj=organization, fields=ORGANIZATION_FIELDS)


@transaction.atomic
def project_save(*, actor: Any, project: Project, values: dict[str, Any] | None = None) -> Project:
    """Create or change a project's settings (archiving has its own service). A new running-job limit wakes the
    scheduler once committed."""
    for name, value in (values or {}).items():
        setattr(project, name, value)
    changes = save_audited(actor=actor, obj=project, fields=PROJECT_FIELDS, project=project)
    if SCHEDULING_FIELDS & set(changes):
        transaction.on_commit(wakeup.wake_scheduler)
    return project


@transaction.atomic
def project_create(
    *, actor: AbstractBaseUser, organization: Organization, name: str, slug: str, description: str = ""
) -> Project:
    """Create a project; its creator becomes its owner."""
    project = project_save(actor=actor, project=Project(), values={
        "organization": organization, "name": name, "slug": slug, "description": description})
    Membership.objects.create(project=project, user=actor, role=Role.OWNER)
    return project


@transaction.atomic
def project_archive(*, actor: Any, project: Project, archived: bool = True) -> Project:
    """Archive a project (its history stays; new jobs are refused) or bring it back."""
    project.archived = archived
    project.save(update_fields=["archived"])
    audit_record(actor=actor, action="project.archive" if archived else "project.unarchive", target=project,
                 project=project)
    return project


def project_delete(*, actor: AbstractBaseUser, project: Project) -> None:
    """Delete an empty project. A project with jobs keeps its history: archive it instead."""
    job_count = project.jobs.count() if hasattr(project, "jobs") else 0
    if job_count:
        raise Conflict(
            f"Project {project.slug} has {job_count} jobs and cannot be deleted; archive it instead.",
            code="project_has_jobs",
        )
    with transaction.atomic():
        audit_record(actor=actor, action="project.delete", target=project, project=None,
                     changes={"slug": project.slug})
        project.delete()


def _check_owner_change(actor_role: str, old_role: str | None, new_role: str | None) -> None:
    if Role.OWNER in (old_role, new_role) and actor_role != Role.OWNER:
        raise Forbidden("Only an owner can grant or take away the owner role.", field="role")


def _check_not_last_owner(membership: Membership) -> None:
    if membership.role == Role.OWNER and not membership.project.memberships.filter(
        role=Role.OWNER
    ).exclude(pk=membership.pk).exists():
        raise Conflict("A project must keep at least one owner.", code="last_owner")


def membership_add(*, actor: AbstractBaseUser, project: Project, user: AbstractBaseUser, role: str) -> Membership:
    return membership_save(actor=actor, membership=Membership(project=project, user=user, role=role))


def membership_change_role(*, actor: AbstractBaseUser, membership: Membership, role: str) -> Membership:
    membership.role = role
    return membership_save(actor=actor, membership=membership)


@transaction.atomic
def membership_save(*, actor: AbstractBaseUser, membership: Membership) -> Membership:
    """Add `membership` (not saved yet) or give it the role it now holds. Its project and user never change: that
    is another membership (remove this one, add that one)."""
    project, user = membership.project, membership.user
    actor_role = require_role(actor, project, Role.ADMIN)
    if membership.pk is None:
        _check_owner_change(actor_role, None, membership.role)
        if Membership.objects.filter(project=project, user=user).exists():
            raise Conflict(f"{user.get_username()} is already a member of {project.slug}.", field="user",
                           code="already_member")
        membership.save()
        audit_record(actor=actor, action="membership.add", target=membership, project=project,
                     changes={"user": user.get_username(), "role": membership.role})
        return membership
    stored = Membership.objects.select_for_update().get(pk=membership.pk)
    if (stored.project_id, stored.user_id) != (membership.project_id, membership.user_id):
        raise DomainError("A membership's project and user do not change: remove it and add another.", field="user")
    _check_owner_change(actor_role, stored.role, membership.role)
    if stored.role == Role.OWNER and membership.role != Role.OWNER:
        _check_not_last_owner(stored)
    if stored.role != membership.role:
        membership.save(update_fields=["role"])
        audit_record(actor=actor, action="membership.change_role", target=membership, project=project,
                     changes={"user": user.get_username(), "role": [stored.role, membership.role]})
    return membership


@transaction.atomic
def membership_remove(*, actor: AbstractBaseUser, membership: Membership) -> None:
    """Remove a member. Their jobs stay, with their history, in the project."""
    membership = Membership.objects.select_for_update().select_related("project", "user").get(pk=membership.pk)
    if membership.user_id != actor.pk:  # anyone may leave a project; removing others needs admin
        actor_role = require_role(actor, membership.project, Role.ADMIN)
        _check_owner_change(actor_role, membership.role, None)
    _check_not_last_owner(membership)
    audit_record(actor=actor, action="membership.remove", target=membership, project=membership.project,
                 changes={"user": membership.user.get_username(), "role": membership.role})
    membership.delete()


@transaction.atomic
def token_create(
    *, user: AbstractBaseUser, name: str, expires_at: datetime | None = None, read_only: bool = False
) -> tuple[ApiToken, str]:
    """Create a personal token (a read-only one answers every write with 403). Returns the secret once; only its
    hash is stored."""
    if expires_at is not None and expires_at <= timezone.now():
        raise DomainError("The expiry must be in the future.", field="expires_at")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=secret[:12], digest=hash_token(secret), expires_at=expires_at,
        read_only=read_only,
    )
    audit_record(actor=user, action="token.create", target=token, changes={"name": name, "read_only": read_only})
    return token, secret


@transaction.atomic
def token_revoke(*, actor: AbstractBaseUser, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(actor=actor, action="token.revoke", target=token, changes={"name": token.name})
    return token


@transaction.atomic
def token_delete(*, actor: AbstractBaseUser, token: ApiToken) -> None:
    """Delete a token and its row (platform staff, in the admin console); revoking keeps the row."""
    delete_audited(actor=actor, obj=token, fields=("name", "prefix", "user"))
