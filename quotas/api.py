"""REST API for flavors, priority classes and quotas. Reads for every user; writes for platform staff."""

from __future__ import annotations

from typing import TYPE_CHECKING

import django_filters
from rest_framework import viewsets
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from core.filters import name_filter
from quotas import selectors, services
from quotas.models import Quota
from quotas.serializers import PriorityClassSerializer, QuotaSerializer, ResourceFlavorSerializer
from tenancy.filters import project_filter
from tenancy.scoping import ScopedViewSet, visible_to_everyone

# The mixin's host, for mypy: without DRF's stubs `ModelViewSet` is an unknown (Any) base, so `action` and the
# permission checks of `super()` are found on it. At run time a plain mixin.
if TYPE_CHECKING:
    from rest_framework.viewsets import ModelViewSet as _ModelViewSet
else:
    _ModelViewSet = object


class StaffWritesMixin(_ModelViewSet):
    """Catalog and quota changes are platform-admin work: anybody else gets 403.

    For existing objects the check runs after the scoped lookup, so another tenant's object still answers 404.
    """

    def _require_staff(self, request) -> None:
        if request.method not in ("GET", "HEAD", "OPTIONS") and not request.user.is_staff:
            raise PermissionDenied("Only platform admins can change this.")

    def check_permissions(self, request) -> None:
        super().check_permissions(request)
        if self.action == "create":
            self._require_staff(request)

    def check_object_permissions(self, request, obj) -> None:
        super().check_object_permissions(request, obj)
        self._require_staff(request)


class CatalogViewSet(StaffWritesMixin, viewsets.ModelViewSet, ScopedViewSet):
    """A catalog (flavors, priority classes): everybody reads, staff write through the services that `save_with`
    and `delete_with` call."""

    project_attr = None
    lookup_field = "name"

    def perform_create(self, serializer) -> None:
        model = serializer.Meta.model
        serializer.instance = self.save_with(actor=self.request.user, obj=model(), values=serializer.validated_data)

    def perform_update(self, serializer) -> None:
        serializer.instance = self.save_with(actor=self.request.user, obj=serializer.instance,
                                             values=serializer.validated_data)

    def perform_destroy(self, instance) -> None:
        self.delete_with(actor=self.request.user, obj=instance)


class ResourceFlavorViewSet(CatalogViewSet):
    selector = visible_to_everyone(selectors.flavors)
    serializer_class = ResourceFlavorSerializer

    @staticmethod
    def save_with(*, actor, obj, values):
        return services.flavor_save(actor=actor, flavor=obj, values=values)

    @staticmethod
    def delete_with(*, actor, obj):
        services.flavor_delete(actor=actor, flavor=obj)


class PriorityClassViewSet(CatalogViewSet):
    selector = visible_to_everyone(selectors.priority_classes)
    serializer_class = PriorityClassSerializer

    @staticmethod
    def save_with(*, actor, obj, values):
        return services.priority_class_save(actor=actor, priority_class=obj, values=values)

    @staticmethod
    def delete_with(*, actor, obj):
        services.priority_class_delete(actor=actor, priority_class=obj)


class QuotaFilter(django_filters.FilterSet):
    project = project_filter()
    flavor = name_filter("flavor", noun="flavor", visible=lambda user: selectors.flavors())  # a catalog

    class Meta:
        model = Quota
        fields = ["project", "flavor"]


class QuotaViewSet(StaffWritesMixin, viewsets.ModelViewSet, ScopedViewSet):
    """Quotas of the caller's projects with live usage: guaranteed, used, borrowed, lent."""

    selector = staticmethod(selectors.quotas_for_user)
    serializer_class = QuotaSerializer
    filterset_class = QuotaFilter
    ordering_fields = ["guaranteed", "project__slug", "flavor__name"]

    def _serialize(self, quotas, many: bool):
        usage = selectors.live_usage(list(quotas) if many else [quotas])
        return self.get_serializer(quotas, many=many, context={**self.get_serializer_context(), "usage": usage}).data

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self._serialize(page, many=True))

    def retrieve(self, request, *args, **kwargs):
        return Response(self._serialize(self.get_object(), many=False))

    def perform_create(self, serializer) -> None:
        data = dict(serializer.validated_data)
        quota = Quota(project=data.pop("project"), flavor=data.pop("flavor"))
        serializer.instance = services.quota_save(actor=self.request.user, quota=quota, values=data)

    def perform_update(self, serializer) -> None:
        data = {k: v for k, v in serializer.validated_data.items() if k in services.QUOTA_FIELDS}
        serializer.instance = services.quota_save(actor=self.request.user, quota=serializer.instance, values=data)

    def perform_destroy(self, instance: Quota) -> None:
        services.quota_delete(actor=self.request.user, quota=instance)
