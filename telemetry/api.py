"""The API of GPU telemetry: per attempt, its GPU efficiency and per-GPU readings (scoped: another organization's
telemetry is a 404); per cluster, where its telemetry is read from (a catalog: everyone reads, staff write)."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from clusters.selectors import clusters
from core.digits import is_digits
from core.errors import DomainError
from core.filters import IdFilter
from quotas.api import StaffWritesMixin
from telemetry import readings, selectors, services
from telemetry.models import AttemptGpu, AttemptTelemetry, TelemetrySource
from telemetry.serializers import (
    AttemptTelemetryDetailSerializer,
    AttemptTelemetrySerializer,
    GpuActivitySerializer,
    TelemetrySourceCreateSerializer,
    TelemetrySourceSerializer,
)
from tenancy.scoping import ScopedViewSet, visible_to_everyone
from tenancy.selectors import project_ids_for_user


class TelemetryFilter(django_filters.FilterSet):
    job = IdFilter(field_name="attempt__job_id")

    class Meta:
        model = AttemptTelemetry
        fields = ["job"]


class AttemptTelemetryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    """GPU telemetry of attempts (by attempt id): mean SM activity (the GPU efficiency) and utilization, since when
    its GPUs idle, and on retrieve each GPU with its latest readings and the charted fields per GPU over the attempt
    (`?buckets=`, at most 240)."""

    selector = staticmethod(selectors.telemetry_for_user)
    serializer_class = AttemptTelemetrySerializer
    project_attr = "attempt.job.project"
    lookup_field = "attempt_id"
    lookup_url_kwarg = "pk"
    filterset_class = TelemetryFilter
    ordering_fields = ["last_at"]

    @extend_schema(responses=AttemptTelemetryDetailSerializer,
                   parameters=[OpenApiParameter("buckets", int, description="Stretches of the attempt (1-240).")])
    def retrieve(self, request: Request, pk: str | None = None) -> Response:
        tally = self.get_object()
        raw = request.query_params.get("buckets", "60")
        if not is_digits(raw) or not 1 <= int(raw) <= readings.MAX_BUCKETS:
            raise DomainError(f"must be a whole number from 1 to {readings.MAX_BUCKETS}", field="buckets")
        gpus = list(tally.attempt.gpus.all())
        found = readings.attempt_readings(tally, gpus, int(raw))
        return Response(AttemptTelemetryDetailSerializer(tally, context={"gpus": gpus, "readings": found}).data)


class GpuActivityFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="attempt__cluster__name")
    node = django_filters.CharFilter(field_name="node")

    class Meta:
        model = AttemptGpu
        fields = ["cluster", "node"]


class GpuActivityViewSet(mixins.ListModelMixin, ScopedViewSet):
    """Every GPU held by an open attempt and read in the last 5 minutes, with its latest SM activity, utilization,
    memory and power (the Clusters page's grid). Like node occupancy, the job and project are named only to their
    members; others read "other"."""

    selector = visible_to_everyone(selectors.current_gpus)
    serializer_class = GpuActivitySerializer
    project_attr = None
    filterset_class = GpuActivityFilter
    ordering_fields = ["node", "gpu"]

    def get_serializer_context(self) -> dict[str, Any]:
        visible = set(project_ids_for_user(self.request.user).values_list("id", flat=True))
        return {**super().get_serializer_context(), "visible": visible}

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        return super().filter_queryset(queryset).order_by("attempt__cluster__name", "node", "gpu")


class TelemetrySourceViewSet(StaffWritesMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                             mixins.CreateModelMixin, mixins.UpdateModelMixin, ScopedViewSet):
    """Where each cluster's GPU telemetry is read (by cluster name): the exporter's label names for pod, namespace,
    node, GPU index and UUID, the matchers that pick the cluster's series, and how far it was read. Kubernetes
    clusters get one with dcgm-exporter's defaults on the first read; platform admins change it."""

    selector = visible_to_everyone(selectors.sources)
    serializer_class = TelemetrySourceSerializer
    project_attr = None
    lookup_field = "cluster__name"
    lookup_url_kwarg = "cluster"
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return TelemetrySourceCreateSerializer if self.action == "create" else TelemetrySourceSerializer

    def perform_create(self, serializer: TelemetrySourceCreateSerializer) -> None:
        values = dict(serializer.validated_data)
        name = values.pop("cluster")
        cluster = clusters().filter(name=name).first()
        if cluster is None:
            raise DomainError(f"No cluster named {name[:63]!r}.", field="cluster")
        if selectors.sources().filter(cluster=cluster).exists():
            raise DomainError(f"Cluster {name!r} has a telemetry source already: change it.", field="cluster",
                              code="already_exists")
        serializer.instance = services.source_save(actor=self.request.user,
                                                   source=TelemetrySource(cluster=cluster), values=values)

    def perform_update(self, serializer: TelemetrySourceSerializer) -> None:
        serializer.instance = services.source_save(actor=self.request.user, source=serializer.instance,
                                                   values=dict(serializer.validated_data))
