"""REST API for clusters and nodes: everyone reads the inventory; platform admins change it.

Occupancy shows the caller's own projects by name and everyone else's as "other".
"""

from __future__ import annotations

import django_filters
from rest_framework import mixins, viewsets

from clusters import selectors
from clusters.models import Node
from clusters.serializers import ClusterSerializer, NodeSerializer
from jobs import wakeup
from quotas.api import StaffWritesMixin
from tenancy.audit import audit_record
from tenancy.scoping import ScopedViewSet


def _everyone(selector):
    return staticmethod(lambda user: selector() if user.is_authenticated else selector().none())


class ClusterViewSet(StaffWritesMixin, viewsets.ModelViewSet, ScopedViewSet):
    selector = _everyone(selectors.clusters)
    serializer_class = ClusterSerializer
    project_attr = None
    lookup_field = "name"


class NodeFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    flavor = django_filters.CharFilter(field_name="flavor__name")

    class Meta:
        model = Node
        fields = ["cluster", "flavor", "rack", "block", "ready", "cordoned"]


class NodeViewSet(StaffWritesMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin,
                  ScopedViewSet):
    """Nodes with their occupancy. Admins cordon a node or mark it not ready (which fails jobs running there)."""

    selector = _everyone(selectors.nodes)
    serializer_class = NodeSerializer
    project_attr = None
    filterset_class = NodeFilter

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "occupancy": selectors.occupancy_by_node(self.request.user)}

    def perform_update(self, serializer) -> None:
        node = serializer.save()
        audit_record(actor=self.request.user, action="node.change", target=node,
                     changes={k: v for k, v in serializer.validated_data.items()})
        wakeup.wake_scheduler()
