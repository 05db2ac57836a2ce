"""The one base class every API viewset derives from: tenant scoping is built in and cannot be overridden.

A subclass names a `selector` (a function of the user returning only what that user may see) instead of a
`queryset`, and may not define `get_queryset`. So another project's object is simply not in the queryset: it
answers 404 exactly like a missing one. Writes then check the caller's role in the object's project (403).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import models
from django.db.models import Model, QuerySet
from django.http import Http404
from rest_framework import viewsets
from rest_framework.exceptions import PermissionDenied

from core.digits import is_digits
from core.filters import MAX_ID
from tenancy import permissions
from tenancy.models import Project, Role

READ_ACTIONS = {"list", "retrieve", "metadata"}


class ScopedViewSet(viewsets.GenericViewSet):
    selector: Callable[..., QuerySet]  # set with staticmethod(...) in subclasses
    # Lighter rows, scoped alike, for every action but `retrieve`: a list row, or the object an action acts on,
    # needs less than the object's whole page (e.g. no prefetched history). None: `selector` for all.
    row_selector: Callable[..., QuerySet] | None = None
    project_attr: str | None = "project"  # attribute path from an object to its Project; None: not project-owned
    write_role: str = Role.MEMBER  # least role for writes on objects of this endpoint

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for forbidden in ("get_queryset", "queryset"):
            if forbidden in cls.__dict__:
                raise TypeError(
                    f"{cls.__name__} must not define {forbidden}: set `selector` so tenant scoping cannot be bypassed"
                )

    def get_queryset(self) -> QuerySet:
        # Looked up on the class: a plain function and a staticmethod both come back unbound.
        selector = type(self).row_selector if self.action != "retrieve" else None
        return (selector or type(self).selector)(self.request.user)

    def get_object(self) -> Model:
        """The object the URL names, scoped. A whole number beyond a 64-bit key names no object by an integer
        field: a 404 before the query, which the database would refuse (the ORM bounds a lookup by primary key, not
        one through a related field such as an attempt's id). A name made of digits is still looked up."""
        value = self.kwargs.get(self.lookup_url_kwarg or self.lookup_field)
        if isinstance(value, str) and is_digits(value) and int(value) > MAX_ID and self._looked_up_by_integer():
            raise Http404
        return super().get_object()

    def _looked_up_by_integer(self) -> bool:
        meta = self.get_queryset().model._meta
        field = meta.pk if self.lookup_field == "pk" else meta.get_field(self.lookup_field)
        return isinstance(getattr(field, "target_field", field), models.IntegerField)

    # Role checks ----------------------------------------------------------------------------------------------
    def project_of(self, obj: Model) -> Project | None:
        if self.project_attr is None:
            return None
        target: Any = obj
        for part in self.project_attr.split("."):
            target = getattr(target, part)
        return target

    def require_role(self, project: Project, role: str | None = None) -> str:
        """403 unless the caller holds at least `role` (default: the endpoint's write role) in the project."""
        return permissions.require_role(self.request.user, project, role or self.write_role, refuse=PermissionDenied)

    def check_object_permissions(self, request, obj: Model) -> None:
        super().check_object_permissions(request, obj)
        if self.action in READ_ACTIONS or request.method in ("GET", "HEAD", "OPTIONS"):
            return
        project = self.project_of(obj)
        if project is not None:
            self.require_role(project)


def visible_to_everyone(selector: Callable[[], QuerySet]) -> staticmethod:
    """A `selector` for catalogs that are not tenant data (flavors, clusters...): every signed-in user sees all."""
    return staticmethod(lambda user: selector() if user.is_authenticated else selector().none())
