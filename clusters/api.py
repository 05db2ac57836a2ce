"""REST API for clusters and nodes: everyone reads the inventory; platform admins change it.

Occupancy shows the caller's own projects by name and everyone else's as "other".
"""

from __future__ import annotations

from dataclasses import asdict

import django_filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from clusters import selectors, services
from clusters.backends.kubernetes import clients, nodesync
from clusters.kube.errors import ApiError
from clusters.models import Cluster, Node
from clusters.serializers import ClusterSerializer, NodeSerializer
from core.errors import DomainError
from core.filters import name_filter
from quotas.api import StaffWritesMixin
from tenancy.scoping import ScopedViewSet, visible_to_everyone


class ClusterViewSet(StaffWritesMixin, viewsets.ModelViewSet, ScopedViewSet):
    """Clusters. Platform admins register Kubernetes clusters with a kubeconfig (write-only), test the connection
    and sync the node inventory on demand."""

    selector = visible_to_everyone(selectors.clusters)
    serializer_class = ClusterSerializer
    project_attr = None
    lookup_field = "name"

    def _save(self, serializer, cluster: Cluster) -> None:
        values = dict(serializer.validated_data)
        kubeconfig = values.pop("kubeconfig", None)
        serializer.instance = services.cluster_save(actor=self.request.user, cluster=cluster, values=values,
                                                    kubeconfig=kubeconfig)

    def perform_create(self, serializer) -> None:
        self._save(serializer, Cluster())

    def perform_update(self, serializer) -> None:
        self._save(serializer, serializer.instance)

    def perform_destroy(self, instance: Cluster) -> None:
        services.cluster_delete(actor=self.request.user, cluster=instance)

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["post"], url_path="test-connection")
    def test_connection(self, request: Request, name: str | None = None) -> Response:
        cluster = self.get_object()
        if not cluster.is_kubernetes:
            return Response({"ok": True, "version": "simulated", "namespace": "", "missing": [], "error": ""})
        return Response(asdict(clients.cluster_test_connection(cluster)))

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["post"], url_path="sync-nodes")
    def sync_nodes(self, request: Request, name: str | None = None) -> Response:
        cluster = self.get_object()
        if not cluster.is_kubernetes:
            raise DomainError("Simulated clusters have no node inventory to sync.", code="not_kubernetes")
        try:
            report = nodesync.cluster_sync_nodes(cluster)
        except ApiError as exc:
            raise DomainError(f"Node sync failed: {exc}", code="kube_unavailable") from None
        return Response(asdict(report))


class NodeFilter(django_filters.FilterSet):
    # Catalogs: every signed-in user sees every cluster and flavor. Racks and blocks are free labels, not names.
    cluster = name_filter("cluster", noun="cluster", visible=lambda user: selectors.clusters())
    flavor = name_filter("flavor", noun="flavor", visible=lambda user: selectors.flavors())

    class Meta:
        model = Node
        fields = ["cluster", "flavor", "rack", "block", "ready", "cordoned"]


class NodeViewSet(StaffWritesMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin,
                  ScopedViewSet):
    """Nodes with their occupancy. Admins cordon a node or mark it not ready (which fails jobs running there)."""

    selector = visible_to_everyone(selectors.nodes)
    serializer_class = NodeSerializer
    project_attr = None
    filterset_class = NodeFilter

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "occupancy": selectors.occupancy_by_node(self.request.user)}

    def perform_update(self, serializer) -> None:
        serializer.instance = services.node_save(actor=self.request.user, node=serializer.instance,
                                                 values=serializer.validated_data)
