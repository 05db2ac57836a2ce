"""Reliability's API: diagnoses (each project's own; another's is a 404), a diagnosis by attempt, the report,
staff's failure patterns and node quarantine."""

from __future__ import annotations

import django_filters
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import DomainError
from core.filters import IdFilter
from reliability import reports, selectors, services
from reliability.models import Diagnosis, FailurePattern, ProjectPolicy
from reliability.serializers import (
    DiagnosisSerializer,
    FailurePatternSerializer,
    NodeQuarantineSerializer,
    ProjectPolicySerializer,
    QuarantineSerializer,
    ReleaseSerializer,
    ReportQuerySerializer,
)
from tenancy.filters import project_filter
from tenancy.models import Project
from tenancy.scoping import ScopedViewSet
from tenancy.selectors import projects_for_user
from tracking.api import ProjectSettingViewSet


class DiagnosisFilter(django_filters.FilterSet):
    project = project_filter()
    job = IdFilter(field_name="job_id")
    attempt = IdFilter(field_name="attempt_id")

    class Meta:
        model = Diagnosis
        fields = ["project", "job", "attempt", "cause", "kind"]


class DiagnosisViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    """Why attempts ended other than succeeded: `?job=<id>`, `?cause=`, `?project=<slug>`."""

    selector = staticmethod(selectors.diagnoses_for_user)
    serializer_class = DiagnosisSerializer
    filterset_class = DiagnosisFilter
    ordering_fields = ["ended_at", "confidence"]


def name_filter_project(request: Request, slug: str):
    project = projects_for_user(request.user).filter(slug=slug).first()
    if project is None:
        raise DomainError(f"No project named {slug[:100]!r}.", field="project")
    return project


class AttemptDiagnosisView(APIView):
    """The diagnosis of one attempt, by the attempt's id (`GET /api/v1/attempts/<id>/diagnosis/`)."""

    @extend_schema(responses=DiagnosisSerializer)
    def get(self, request: Request, id: int) -> Response:  # noqa: A002  (the path's name, as the router's)
        diagnosis = selectors.diagnosis_of_attempt(request.user, id)
        if diagnosis is None:
            raise Http404
        return Response(DiagnosisSerializer(diagnosis).data)


class ReliabilityReportView(APIView):
    """Failures by class per project, cluster, node and week; mean time to recovery; effective training time per
    job; GPU-hours and money lost (`?since=&until=` ISO times, default the last 28 days; `?project=<slug>`)."""

    @extend_schema(parameters=[ReportQuerySerializer], responses=dict)
    def get(self, request: Request) -> Response:
        query = ReportQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        diagnoses = selectors.diagnoses_for_user(request.user)
        if query.validated_data.get("project"):
            diagnoses = diagnoses.filter(project=name_filter_project(request, query.validated_data["project"]))
        report = reports.reliability_report(diagnoses, query.validated_data["since"], query.validated_data["until"])
        return Response(report.as_dict())


class FailurePatternViewSet(viewsets.ModelViewSet, ScopedViewSet):
    """Patterns staff add to the built-in diagnosis rules. Staff only: anybody else sees none and may write none."""

    selector = staticmethod(selectors.patterns_for_user)
    serializer_class = FailurePatternSerializer
    project_attr = None

    def check_permissions(self, request: Request) -> None:
        super().check_permissions(request)
        if not request.user.is_staff and request.method not in ("GET", "HEAD", "OPTIONS"):
            raise PermissionDenied("Only platform admins can change failure patterns.")

    def perform_create(self, serializer) -> None:
        serializer.instance = services.pattern_create(actor=self.request.user, data=serializer.validated_data)

    def perform_update(self, serializer) -> None:
        serializer.instance = services.pattern_update(serializer.instance, actor=self.request.user,
                                                      data=serializer.validated_data)

    def perform_destroy(self, instance: FailurePattern) -> None:
        services.pattern_delete(instance, actor=self.request.user)


class NodeQuarantineViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    """Node quarantine: the list shows quarantined nodes (`?all=true`: every node), staff quarantine a node by
    hand or release it."""

    selector = staticmethod(selectors.nodes_for_user)
    serializer_class = NodeQuarantineSerializer
    project_attr = None

    def filter_queryset(self, queryset):
        queryset = super().filter_queryset(queryset)
        if self.action == "list" and self.request.query_params.get("all") != "true":
            queryset = queryset.filter(quarantined_at__isnull=False)
        return queryset

    def _staff(self, request: Request) -> None:
        if not request.user.is_staff:
            raise PermissionDenied("Only platform admins can quarantine or release nodes.")

    @extend_schema(request=QuarantineSerializer, responses=NodeQuarantineSerializer)
    @action(detail=True, methods=["post"])
    def quarantine(self, request: Request, pk: int | None = None) -> Response:
        node = self.get_object()
        self._staff(request)
        body = QuarantineSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.node_quarantine(node, reason=body.validated_data["reason"], actor=request.user)
        return Response(NodeQuarantineSerializer(node).data)

    @extend_schema(request=ReleaseSerializer, responses=NodeQuarantineSerializer)
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: int | None = None) -> Response:
        node = self.get_object()
        self._staff(request)
        body = ReleaseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.node_release(node, actor=request.user, note=body.validated_data.get("note", ""))
        return Response(NodeQuarantineSerializer(node).data)


class ProjectPolicyFilter(django_filters.FilterSet):
    project = project_filter()

    class Meta:
        model = ProjectPolicy
        fields = ["project"]


class ProjectPolicyViewSet(ProjectSettingViewSet):
    """A project's reliability choices (restart its hung jobs from their checkpoint); project admins write."""

    selector = staticmethod(selectors.policies_for_user)
    serializer_class = ProjectPolicySerializer
    filterset_class = ProjectPolicyFilter
    noun = "A reliability policy"

    def new(self, project: Project) -> ProjectPolicy:
        return ProjectPolicy(project=project)

    def save(self, obj: ProjectPolicy, values: dict) -> ProjectPolicy:
        return services.policy_save(actor=self.request.user, policy=obj, values=values)

    def remove(self, obj: ProjectPolicy) -> None:
        services.policy_delete(actor=self.request.user, policy=obj)
