"""The one vocabulary of project permissions: what a role allows, a user's role in a project, and who manages a job.

Services, DRF viewsets, pages and the MLflow endpoints all ask here, so a rule is written once:

- roles are ranked (viewer < member < admin < owner) and a higher role may do everything a lower one may;
  platform staff act as owners of every project;
- members manage their own jobs (and the runs of their jobs); admins and owners manage every job of the project.

A user's role found while looking the project up (`tenancy.selectors.project_for_user`) is remembered for the rest
of the request, so the request's later role checks need no query. The memo belongs to the request, not to a
`Project` instance: `tenancy.middleware.RoleMemoMiddleware` opens one per request (a context variable, so services,
which receive an actor and not the request, find it too); outside a request nothing is remembered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeAlias

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from core.errors import Forbidden
from tenancy.models import Membership, Project, Role

User: TypeAlias = AbstractBaseUser | AnonymousUser

# Higher rank may do everything a lower rank may.
ROLE_RANK: dict[str, int] = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2, Role.OWNER: 3}


def role_at_least(role: str | None, minimum: str) -> bool:
    """Whether `role` (None: no role, an outsider) allows what `minimum` allows."""
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[minimum]


def roles_at_least(minimum: str) -> list[str]:
    """Every role that allows what `minimum` allows (for queries: `role__in=`)."""
    return [role for role in ROLE_RANK if role_at_least(role, minimum)]


# The request's memo -----------------------------------------------------------------------------------------------
# (user id, project id) -> role. None: no request open, nothing is remembered.
_request_roles: ContextVar[dict[tuple[Any, Any], str] | None] = ContextVar("tidal_request_roles", default=None)


@contextmanager
def roles_remembered() -> Iterator[None]:
    """Within: roles remembered by `remember_role` answer this request's role checks (a request's scope)."""
    token = _request_roles.set({})
    try:
        yield
    finally:
        _request_roles.reset(token)


def remember_role(user: User, project: Project, role: str) -> None:
    """Remember, for the rest of the request, the role the user was just found to hold in the project."""
    memo = _request_roles.get()
    if memo is not None:
        memo[(user.pk, project.pk)] = role


def forget_role(sender: Any, instance: Membership, **kwargs: Any) -> None:
    """Signal receiver: a membership was saved or deleted; its user's remembered role in its project is stale."""
    memo = _request_roles.get()
    if memo is not None:
        memo.pop((instance.user_id, instance.project_id), None)


# Questions --------------------------------------------------------------------------------------------------------
def role_in_project(user: User, project: Project) -> str | None:
    """The user's role in the project (staff act as owners), or None for an outsider."""
    if not user.is_authenticated:
        return None
    if user.is_staff:
        return Role.OWNER
    memo = _request_roles.get()
    if memo is not None and (user.pk, project.pk) in memo:
        return memo[(user.pk, project.pk)]
    # One membership per (project, user): ordered by key, not by the model's ordering, which joins the project and
    # the user to sort one row.
    return Membership.objects.filter(project=project, user=user).order_by("pk").values_list("role", flat=True).first()


def has_role(user: User, project: Project, minimum: str) -> bool:
    """Whether the user holds at least `minimum` in the project."""
    return role_at_least(role_in_project(user, project), minimum)


def require_role(user: User, project: Project, minimum: str, *,
                 refuse: Callable[[str], Exception] = Forbidden) -> str:
    """The user's role in the project, when it is at least `minimum`; else raise `refuse` (a 403: the domain's
    `Forbidden` for services, DRF's `PermissionDenied` for viewsets) naming the role needed."""
    role = role_in_project(user, project)
    if role is None or not role_at_least(role, minimum):
        raise refuse(f"This needs the {minimum} role in project {project.slug}.")
    return role


def can_manage_job(user: User, role: str | None, submitter_id: int | None) -> bool:
    """Whether `user`, of `role` in a job's project, manages a job submitted by `submitter_id` (cancels it,
    reports its checkpoints, writes to its run): members their own jobs, admins and owners every job, viewers none."""
    return role_at_least(role, Role.MEMBER) and (role_at_least(role, Role.ADMIN) or submitter_id == user.pk)


def is_submitter_or_admin(user: User, project: Project, submitter_id: int | None) -> bool:
    """Whether `user` submitted the job, or administers its project (admins, owners, staff): who reads what a job
    keeps from the rest of the project, such as its env's values. The submitter needs no role query."""
    if not user.is_authenticated:
        return False
    return submitter_id == user.pk or has_role(user, project, Role.ADMIN)
