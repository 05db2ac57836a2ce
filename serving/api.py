"""REST API for services: a project's members create, change and delete them, and push their metric; every member
reads them. Another project's service is a 404 like a missing one."""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.parsers import JSONParser, YAMLParser
from pools.api import PoolTokenAuthentication, token_pool
from serving import selectors, services
from serving.models import Service
from serving.serializers import MetricSerializer, ServiceChangeSerializer, ServiceCreateSerializer, ServiceSerializer
from tenancy.auth import BearerTokenAuthentication
from tenancy.filters import project_filter
from tenancy.scoping import ScopedViewSet


class ServiceFilter(django_filters.FilterSet):
    project = project_filter()
    pool = django_filters.CharFilter(field_name="pool__name")

    class Meta:
        model = Service
        fields = ["project", "pool"]


class ServiceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    """Tidal-run inference services: replicas in a pool, scaled with the HPA's rules on their metric."""

    selector = staticmethod(selectors.services_for_user)
    serializer_class = ServiceSerializer
    parser_classes = [JSONParser, YAMLParser]
    filterset_class = ServiceFilter

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "detail": self.action != "list"}

    def _shown(self, service: Service, code: int = status.HTTP_200_OK) -> Response:
        fresh = selectors.services_for_user(self.request.user).get(pk=service.pk)
        return Response(ServiceSerializer(fresh, context=self.get_serializer_context()).data, status=code)

    @extend_schema(request=ServiceCreateSerializer, responses={201: ServiceSerializer})
    def create(self, request: Request) -> Response:
        body = ServiceCreateSerializer(data=request.data, context=self.get_serializer_context())
        body.is_valid(raise_exception=True)
        project, values = body.to_model_values()
        self.require_role(project)
        service = services.service_create(actor=request.user, project=project, values=values)
        return self._shown(service, status.HTTP_201_CREATED)

    @extend_schema(request=ServiceChangeSerializer, responses=ServiceSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        service = self.get_object()
        body = ServiceChangeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        service = services.service_update(actor=request.user, service=service, values=body.to_model_values())
        return self._shown(service)

    def destroy(self, request: Request, pk: str | None = None) -> Response:
        services.service_delete(actor=request.user, service=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=MetricSerializer, responses=ServiceSerializer)
    @action(detail=True, methods=["put"])
    def metric(self, request: Request, pk: str | None = None) -> Response:
        """The service's metric now, pushed by the service or its gateway (at least every minute: an older one is
        missing, and the autoscaler then keeps the replicas)."""
        service = self.get_object()
        body = MetricSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        service = services.metric_set(service=service, value=body.validated_data["value"],
                                      p99_latency_ms=body.validated_data.get("p99_latency_ms"))
        return self._shown(service)



class PoolServiceMetricView(APIView):
    """A service's metric pushed with its pool's token (`PUT /api/v1/pools/<name>/services/<id>/metric/`): for the
    serving gateway or autoscaler that runs for the whole pool, as the pool's demand endpoint takes (a member's token
    pushes through `/api/v1/services/<id>/metric/`)."""

    # A personal token is authenticated too, so that it is refused as the wrong kind (PoolDemandView).
    authentication_classes = [PoolTokenAuthentication, BearerTokenAuthentication]
    permission_classes: list = []

    @extend_schema(request=MetricSerializer, responses=OpenApiTypes.OBJECT)
    def put(self, request: Request, name: str, pk: int) -> Response:
        pool = token_pool(request, name)
        service = selectors.pool_services(pool).filter(pk=pk).first()
        if service is None:
            raise NotFound(f"No service {pk} in pool {name!r}.")
        body = MetricSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        service = services.metric_set(service=service, value=body.validated_data["value"],
                                      p99_latency_ms=body.validated_data.get("p99_latency_ms"))
        # What the token may see: its pool's service by id and name, and the figures it pushed.
        return Response({"id": service.pk, "name": service.name, "metric_value": service.metric_value,
                         "metric_at": service.metric_at, "p99_latency_ms": service.p99_latency_ms,
                         "replicas": service.replicas, "ready_replicas": service.ready_replicas})
