"""REST API for jobs and the queue."""

from __future__ import annotations

import django_filters
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from jobs import selectors, services
from jobs.models import Job
from jobs.serializers import JobDetailSerializer, JobSerializer, JobSubmitSerializer
from jobs.states import State
from mlplatform.parsers import YAMLParser
from tenancy.scoping import ScopedViewSet


class JobFilter(django_filters.FilterSet):
    project = django_filters.CharFilter(field_name="project__slug")
    flavor = django_filters.CharFilter(field_name="flavor__name")
    submitter = django_filters.CharFilter(field_name="submitter_name")
    state = django_filters.MultipleChoiceFilter(choices=State.choices)
    submitted_after = django_filters.IsoDateTimeFilter(field_name="submitted_at", lookup_expr="gte")

    class Meta:
        model = Job
        fields = ["project", "flavor", "submitter", "state", "stage", "launcher", "experiment"]


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, ScopedViewSet):
    """Submit (JSON or YAML), list, inspect, cancel and resubmit jobs. Jobs are never edited or deleted: their
    history stays."""

    selector = staticmethod(selectors.job_detail_for_user)
    filterset_class = JobFilter
    ordering_fields = ["submitted_at", "id", "state", "total_devices"]
    parser_classes = [JSONParser, YAMLParser]

    def get_serializer_class(self):
        if self.action == "create":
            return JobSubmitSerializer
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    @extend_schema(request=JobSubmitSerializer, responses={201: JobDetailSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        serializer = JobSubmitSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        spec = dict(serializer.validated_data)
        project = spec.pop("project")
        self.require_role(project)
        job = services.job_submit(actor=request.user, project=project, spec=spec)
        job = self.get_queryset().get(pk=job.pk)
        return Response(JobDetailSerializer(job, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=JobDetailSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        services.job_cancel(actor=request.user, job=job)
        return Response(JobDetailSerializer(self.get_queryset().get(pk=job.pk)).data)

    @extend_schema(request=None, responses={201: JobDetailSerializer})
    @action(detail=True, methods=["post"])
    def resubmit(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        self.require_role(job.project)
        new = services.job_resubmit(actor=request.user, job=job)
        return Response(JobDetailSerializer(self.get_queryset().get(pk=new.pk)).data, status=status.HTTP_201_CREATED)


class QueueFilter(django_filters.FilterSet):
    project = django_filters.CharFilter(field_name="project__slug")
    flavor = django_filters.CharFilter(field_name="flavor__name")

    class Meta:
        model = Job
        fields = ["project", "flavor"]


class QueueViewSet(mixins.ListModelMixin, ScopedViewSet):
    """Waiting jobs with the reason they wait, their position per project and per flavor, and an ETA."""

    selector = staticmethod(selectors.queue_for_user)
    serializer_class = JobSerializer
    filterset_class = QueueFilter
    ordering_fields = ["flavor_position", "project_position", "submitted_at"]
