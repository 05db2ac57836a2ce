"""REST API for jobs and the queue."""

from __future__ import annotations

import django_filters
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from core.filters import MomentFilter, name_filter, unknown_name
from core.parsers import JSONParser, YAMLParser
from jobs import selectors, services
from jobs.auth import AUTHENTICATION_CLASSES, AttemptThrottle, UserOrAttempt, attempt_credential
from jobs.logs import job_log_stream, job_logs
from jobs.models import Job
from jobs.serializers import (
    AttemptSerializer,
    CheckpointSerializer,
    FailureCausesSerializer,
    JobDetailSerializer,
    JobLogsSerializer,
    JobSerializer,
    JobSubmitSerializer,
    LogQuerySerializer,
    QueueJobSerializer,
    ScaleSerializer,
)
from jobs.states import State
from quotas.selectors import flavors
from tenancy.filters import project_filter
from tenancy.scoping import ScopedViewSet
from tenancy.selectors import projects_for_user


def flavor_filter() -> django_filters.ModelChoiceFilter:
    return name_filter("flavor", noun="flavor", visible=lambda user: flavors())  # a catalog: everyone sees it


class JobFilter(django_filters.FilterSet):
    project = project_filter()
    flavor = flavor_filter()
    # Free text, not names of objects: a submitter's name outlives a deleted account, experiments have no catalog.
    submitter = django_filters.CharFilter(field_name="submitter_name")
    # No join, so no duplicates: DISTINCT (the filter's default) would make PostgreSQL sort every column of the jobs.
    state = django_filters.MultipleChoiceFilter(choices=State.choices, distinct=False)
    submitted_after = MomentFilter(field_name="submitted_at", lookup_expr="gte")

    class Meta:
        model = Job
        fields = ["project", "flavor", "submitter", "state", "stage", "launcher", "experiment"]


def _checkpoint_of(request: Request) -> dict:
    body = CheckpointSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    return body.validated_data


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, ScopedViewSet):
    """Submit (JSON or YAML), list, inspect, cancel and resubmit jobs. Jobs are never edited or deleted: their
    history stays."""

    selector = staticmethod(selectors.job_detail_for_user)
    row_selector = staticmethod(selectors.jobs_for_user)  # lists and actions read no groups, attempts or events
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
        submitted = services.job_submit(actor=request.user, project=spec.pop("project"), spec=spec)
        context = {**self.get_serializer_context(), "related": submitted.related()}
        return Response(JobDetailSerializer(submitted.job, context=context).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=JobDetailSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        services.job_cancel(actor=request.user, job=job)
        cancelled = selectors.job_detail_for_user(request.user).get(pk=job.pk)
        return Response(JobDetailSerializer(cancelled, context=self.get_serializer_context()).data)

    @extend_schema(parameters=[
        OpenApiParameter("replica", str, description="<role>-<index>, e.g. worker-0 (default: the first replica)"),
        OpenApiParameter("attempt", int, description="an attempt's number (default: the current or last one)"),
        OpenApiParameter("tail", int, description="last lines, 1-5000 (default 200)"),
        OpenApiParameter("follow", bool, description="stream text/plain lines until the replica ends"),
        OpenApiParameter("cursor", str, description="with follow: resume a paused stream (the cursor= of its last "
                                                    "line)"),
    ], responses={200: JobLogsSerializer, (200, "text/plain"): OpenApiTypes.STR})
    @action(detail=True, methods=["get"])
    def logs(self, request: Request, pk: str | None = None) -> Response | StreamingHttpResponse:
        """A replica's log tail: from its pod while the attempt runs, else the last lines the attempt kept when it
        ended (simulated clusters answer synthetic lines). `follow=true` streams the tail and then new lines as
        text/plain until the replica ends, or pauses after TIDAL_LOG_FOLLOW_MAX_SECONDS with a last line giving the
        `cursor` to resume from; a caller may follow TIDAL_LOG_STREAMS_PER_USER logs at once (429 beyond)."""
        job = self.get_object()
        query = LogQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = {"replica": query.validated_data["replica"], "tail": query.validated_data["tail"],
                   "attempt": query.validated_data["attempt"]}
        if query.validated_data["follow"]:
            stream = job_log_stream(job, user=request.user, cursor=query.validated_data["cursor"], **options)
            response = StreamingHttpResponse(stream, content_type="text/plain; charset=utf-8")
            response["X-Accel-Buffering"] = "no"  # a buffering proxy (nginx) would hold the lines back
            response["Cache-Control"] = "no-cache"
            return response
        return Response(JobLogsSerializer(job_logs(job, **options)).data)

    @extend_schema(request=CheckpointSerializer, responses=AttemptSerializer)
    @action(detail=True, methods=["post"], authentication_classes=AUTHENTICATION_CLASSES,
            permission_classes=[UserOrAttempt], throttle_classes=[AttemptThrottle])
    def checkpoint(self, request: Request, pk: str | None = None) -> Response:
        """Report the checkpoint the running attempt just saved: the next attempt is given the latest one reported
        (TIDAL_RESUME_FROM, TIDAL_RESUME_STEP). By the job's own process with its attempt's run token (its own job
        only, while the attempt is the current one), or by a member who manages the job."""
        credential = attempt_credential(request)
        if credential is None:
            job = self.get_object()
            self.require_role(job.project)
            attempt = services.attempt_report_checkpoint(actor=request.user, job=job, **_checkpoint_of(request))
        else:
            if pk != str(credential.job_id):  # answered before any lookup: it tells nothing of the job asked for
                raise PermissionDenied("A run token reports the checkpoint of its own job only.")
            attempt = services.attempt_report_own_checkpoint(job_id=credential.job_id, attempt=credential.attempt,
                                                             **_checkpoint_of(request))
        return Response(AttemptSerializer(attempt).data)

    @extend_schema(parameters=[OpenApiParameter("project", str, description="project slug (default: all yours)")],
                   responses=FailureCausesSerializer)
    @action(detail=False, methods=["get"], url_path="failure-causes")
    def failure_causes(self, request: Request) -> Response:
        """Failed and lost attempts counted by cause, and by rack and cause where the rack is known."""
        jobs = self.get_queryset()
        slug = request.query_params.get("project", "")
        if slug:
            if not projects_for_user(request.user).filter(slug=slug).exists():
                raise unknown_name("project", slug, noun="project")
            jobs = jobs.filter(project__slug=slug)
        body = {"project": slug or None, **selectors.failure_counts(jobs)}
        return Response(FailureCausesSerializer(body).data)

    @extend_schema(request=ScaleSerializer, responses=JobDetailSerializer)
    @action(detail=True, methods=["post"])
    def scale(self, request: Request, pk: str | None = None) -> Response:
        """Set an elastic job's maximum replicas while it waits or runs: raised, the scheduler may grow it into idle
        capacity; lowered below what it runs, it shrinks at once (its highest ranks). For those who manage the job."""
        job = self.get_object()
        body = ScaleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.job_scale(actor=request.user, job=job, maximum=body.validated_data["max"],
                           role=body.validated_data["role"])
        scaled = selectors.job_detail_for_user(request.user).get(pk=job.pk)
        return Response(JobDetailSerializer(scaled, context=self.get_serializer_context()).data)

    @extend_schema(request=None, responses={201: JobDetailSerializer})
    @action(detail=True, methods=["post"])
    def resubmit(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        self.require_role(job.project)
        new = services.job_resubmit(actor=request.user, job=job)
        context = {**self.get_serializer_context(), "related": new.related()}
        return Response(JobDetailSerializer(new.job, context=context).data, status=status.HTTP_201_CREATED)


class QueueFilter(django_filters.FilterSet):
    project = project_filter()
    flavor = flavor_filter()

    class Meta:
        model = Job
        fields = ["project", "flavor"]


class QueueViewSet(mixins.ListModelMixin, ScopedViewSet):
    """Waiting jobs with the reason they wait, their position per project and per flavor, and an ETA."""

    selector = staticmethod(selectors.queue_for_user)
    serializer_class = QueueJobSerializer
    filterset_class = QueueFilter
    ordering_fields = ["flavor_position", "project_position", "submitted_at"]
