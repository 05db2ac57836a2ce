"""REST API of experiments, runs, their series and alerts; the ingestion endpoint (`log-batch`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping

import django_filters
from django.db.models import Count, Model, Q, QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from core.csvstream import line_writer
from core.filters import IdFilter
from core.parsers import FormParser, MultiPartParser
from jobs.auth import AUTHENTICATION_CLASSES, UserOrAttempt
from tenancy.filters import project_filter
from tenancy.models import Project, Role
from tenancy.permissions import role_in_project
from tenancy.scoping import ScopedViewSet
from tenancy.selectors import User, project_for_user
from tracking import alerts, costing, selectors, services
from tracking.auth import LoggingThrottle, check_run_writer, run_credential
from tracking.bodies import BatchJSONParser, body_of
from tracking.models import Alert, AlertRule, ChartPanel, Experiment, Run, Webhook
from tracking.serializers import (
    AlertRuleSerializer,
    AlertSerializer,
    ChartPanelSerializer,
    ExperimentSerializer,
    LogBatchSerializer,
    MuteSerializer,
    RunCostSerializer,
    RunCreateSerializer,
    RunGroupsSerializer,
    RunSerializer,
    RunTagsSerializer,
    RunUpdateSerializer,
    SeriesSerializer,
    WebhookSerializer,
)
from tracking.series.downsample import kind_of
from tracking.series.validate import BatchError, check_key

DEFAULT_MAX_POINTS = 1000
MAX_ATTEMPT = 32_767  # a point's attempt is a small integer column
MAX_MAX_POINTS = 100_000


class ExperimentFilter(django_filters.FilterSet):
    project = project_filter()

    class Meta:
        model = Experiment
        fields = ["project"]


class ExperimentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                        mixins.UpdateModelMixin, ScopedViewSet):
    """Experiments group runs within a project; a job's `experiment` names one (created on first use)."""

    selector = staticmethod(selectors.experiments_for_user)
    serializer_class = ExperimentSerializer
    filterset_class = ExperimentFilter
    ordering_fields = ["name", "created_at"]
    http_method_names = ["get", "post", "patch", "head", "options"]

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        # Deleted runs are not counted, as lists leave them out.
        return super().filter_queryset(queryset.annotate(run_count=Count("runs", filter=Q(runs__deleted_at=None))))

    def perform_create(self, serializer: ExperimentSerializer) -> None:
        project = serializer.validated_data["project"]
        self.require_role(project)
        experiment = services.experiment_create(
            project=project, name=serializer.validated_data["name"],
            description=serializer.validated_data.get("description", ""))
        experiment.run_count = 0  # what the list's annotation gives; a new experiment has no runs yet
        serializer.instance = experiment

    def perform_update(self, serializer: ExperimentSerializer) -> None:
        if "project" in serializer.validated_data:
            raise ValidationError({"project": ["An experiment cannot move to another project."]})
        serializer.save()


class RunFilter(django_filters.FilterSet):
    project = project_filter()
    experiment = IdFilter(field_name="experiment_id")
    job = IdFilter(field_name="job_id")

    class Meta:
        model = Run
        fields = ["project", "experiment", "job", "status"]


def _pairs(request: Request, name: str) -> list[tuple[str, str]]:
    out = []
    for raw in request.query_params.getlist(name):
        key, sep, value = raw.partition(":")
        if not sep or not key:
            raise ValidationError({name: [f"{raw[:100]!r}: use {name}=<key>:<value>."]})
        out.append((key, value))
    return out


def filter_runs(queryset: QuerySet, request: Request) -> QuerySet:
    """?param=lr:0.001, ?tag=k:v and ?metric=loss<2 (repeatable, all must match), ?name= (a part of the name),
    ?lifecycle=active|deleted|all (deleted runs are hidden by default) and ?sort= (see
    tracking.selectors.filter_runs, which the runs page uses too)."""
    metrics = [selectors.parse_metric_filter(raw) for raw in request.query_params.getlist("metric")]
    return selectors.filter_runs(queryset, params=_pairs(request, "param"), tags=_pairs(request, "tag"),
                                 metrics=metrics, sort=request.query_params.get("sort", ""),
                                 name=request.query_params.get("name", ""),
                                 lifecycle=request.query_params.get("lifecycle", selectors.ACTIVE))


class RunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    """Runs: one per job (continued across its attempts), or logged from anywhere with the SDK or MLflow."""

    selector = staticmethod(selectors.runs_for_user)
    serializer_class = RunSerializer
    filterset_class = RunFilter
    ordering_fields = ["started_at", "name", "status"]

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        queryset = super().filter_queryset(queryset)
        return filter_runs(queryset, self.request) if self.action in ("list", "groups") else queryset

    def paginate_queryset(self, queryset: QuerySet) -> list | None:
        page = super().paginate_queryset(queryset)
        if page is not None:
            self.page_states = selectors.shown_states(page)
        return page

    def get_serializer_context(self) -> dict:
        return {**super().get_serializer_context(), "shown_states": getattr(self, "page_states", None)}

    @extend_schema(request=RunCreateSerializer, responses={201: RunSerializer})
    def create(self, request: Request) -> Response:
        data = RunCreateSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        project = data.validated_data["project"]
        self.require_role(project)
        experiment = services.experiment_get_or_create(project=project,
                                                      name=data.validated_data.get("experiment", ""))
        run = services.run_create(project=project, experiment=experiment, name=data.validated_data.get("name", ""),
                                  user=request.user, params=data.validated_data.get("params"),
                                  tags=data.validated_data.get("tags"))
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=RunUpdateSerializer, responses=RunSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        run = self.get_object()
        check_run_writer(run, request.user, role_in_project(request.user, run.project))
        data = RunUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.run_update(run=run, **data.validated_data)
        return Response(RunSerializer(run).data)

    def destroy(self, request: Request, pk: str | None = None) -> Response:
        """Soft delete (MLflow's `deleted` lifecycle stage): the run leaves lists and searches (?lifecycle=deleted
        shows it), takes no more data, and comes back whole with `restore`. Writers of the run may."""
        run = self._writable()
        services.run_delete(actor=request.user, run=run)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses=RunSerializer)
    @action(detail=True, methods=["post"])
    def restore(self, request: Request, pk: str | None = None) -> Response:
        """Bring a deleted run back, as it was."""
        run = services.run_restore(actor=request.user, run=self._writable())
        return Response(RunSerializer(run).data)

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["post"])
    def purge(self, request: Request, pk: str | None = None) -> Response:
        """Delete a deleted run for good, its points and artifacts with it: staff only (deleted runs are purged
        anyway TIDAL_TRACKING_DELETED_RETENTION_DAYS after their deletion)."""
        run = self._writable()
        if not request.user.is_staff:
            raise PermissionDenied("Only staff purge a run; a deleted run is purged after the retention period.")
        services.run_purge(actor=request.user, run=run)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=RunTagsSerializer, responses=RunSerializer)
    @action(detail=True, methods=["post"])
    def tags(self, request: Request, pk: str | None = None) -> Response:
        """Set tags (`set`: {key: value}) and remove others (`remove`: [key]), all or nothing; a finished run takes
        them too."""
        run = self._writable()
        data = RunTagsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.run_tags_change(run=run, set_tags=data.validated_data.get("set"),
                                 remove=data.validated_data.get("remove"))
        return Response(RunSerializer(run).data)

    @extend_schema(parameters=[
        OpenApiParameter("group_by", str, required=True, description="param.<key> or tag.<key>"),
        OpenApiParameter("metric_key", str, many=True, description="Metrics whose last values are aggregated.")],
        responses=RunGroupsSerializer)
    @action(detail=False, methods=["get"])
    def groups(self, request: Request) -> Response:
        """The runs (with the list's filters: ?experiment, ?tag, ?param, ?name, ?lifecycle...) grouped by a param's
        or tag's value: per group its runs' count and ids and, per asked metric, the mean, min and max of their last
        values. One grouped query over run rows; runs without the key form the group `null`."""
        runs = self.filter_queryset(self.get_queryset())
        group_by = request.query_params.get("group_by", "")
        keys = request.query_params.getlist("metric_key")
        try:
            found = selectors.run_groups(runs, group_by, keys)
        except BatchError as e:
            raise ValidationError({e.field: [e.message]}) from None
        return Response({"group_by": group_by, "groups": found})

    def _writable(self) -> Run:
        """The run (404 when the caller may not see it), if the caller may write it (403: a viewer; another
        member's job's run)."""
        run = self.get_object()
        check_run_writer(run, self.request.user, role_in_project(self.request.user, run.project))
        return run

    @extend_schema(parameters=[
        OpenApiParameter("key", str, required=True), OpenApiParameter("max_points", int),
        OpenApiParameter("min_step", int), OpenApiParameter("max_step", int),
        OpenApiParameter("times", bool, description="Also the wall time of every step returned (charts by time).")],
        responses=SeriesSerializer)
    @action(detail=True, methods=["get"])
    def series(self, request: Request, pk: str | None = None) -> Response:
        """One metric of the run, downsampled on the server to at most `max_points` points while keeping every
        bucket's minimum and maximum; NaN and infinities come back as markers."""
        run = self.get_object()
        key, max_points, min_step, max_step = _series_query(request)
        found = selectors.series(run, key, max_points=max_points, min_step=min_step, max_step=max_step)
        body = {"key": key, "total": found.total, "points": found.points,
                "markers": [[s, _special(v)] for s, v in found.markers], "attempts": selectors.attempt_starts(run)}
        if request.query_params.get("times") in ("1", "true"):
            steps = [s for s, _ in found.points] + [s for s, _ in found.markers]
            body["times"] = sorted(selectors.step_times(run, key, steps).items())
        return Response(body)

    @extend_schema(parameters=[
        OpenApiParameter("key", str, description="A metric whose target value the cost is asked at."),
        OpenApiParameter("below", float, description="The cost when `key` first went below this."),
        OpenApiParameter("above", float, description="The cost when `key` first went above this.")],
        responses=RunCostSerializer)
    @action(detail=True, methods=["get"])
    def cost(self, request: Request, pk: str | None = None) -> Response:
        """What the run's job cost so far, and when it first reached a metric value and what it had cost then.
        A run without a job has no metered cost (`cost` null)."""
        run = self.get_object()
        target = _target(request)
        found = costing.run_costs([run], target).get(run.pk)
        reached = found.reached if found else None
        return Response({"currency": found.currency if found else None, "cost": found.cost if found else None,
                         "target": str(target) if target else None,
                         "reached": None if reached is None else
                         {"step": reached.step, "at": reached.at, "cost": reached.cost}})

    @extend_schema(parameters=[OpenApiParameter("key", str, description="Only this key; all keys when absent.")],
                   responses={(200, "text/csv"): str})
    @action(detail=True, methods=["get"])
    def csv(self, request: Request, pk: str | None = None) -> StreamingHttpResponse:
        """Every point of the run (or of one key) at full resolution, streamed."""
        run = self.get_object()
        keys = [request.query_params["key"]] if "key" in request.query_params else selectors.run_keys(run)
        response = StreamingHttpResponse(_csv_rows(run, keys), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.csv"'
        return response

    @extend_schema(request=MuteSerializer, responses=RunSerializer)
    @action(detail=True, methods=["post"])
    def mute(self, request: Request, pk: str | None = None) -> Response:
        """Mute a rule (or, without one, every rule) on the run: no more alerts there, its open ones close."""
        return self._mutes(request, alerts.run_mute)

    @extend_schema(request=MuteSerializer, responses=RunSerializer)
    @action(detail=True, methods=["post"])
    def unmute(self, request: Request, pk: str | None = None) -> Response:
        """Lift the mute of a rule (or, without one, every mute) on the run."""
        return self._mutes(request, alerts.run_unmute)

    def _mutes(self, request: Request, change: Callable[..., Run]) -> Response:
        run = self.get_object()
        data = MuteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(RunSerializer(change(actor=request.user, run=run, rule=data.validated_data.get("rule"))).data)


def _target(request: Request) -> costing.Target | None:
    params = request.query_params
    try:
        return costing.parse_target(params.get("key"), params.get("below"), params.get("above"))
    except costing.TargetError as e:
        raise ValidationError({e.field: [str(e)]}) from None


def _series_query(request: Request) -> tuple[str, int, int | None, int | None]:
    try:
        key = check_key(request.query_params.get("key"), "key")
    except BatchError as e:
        raise ValidationError({"key": [e.message]}) from None
    max_points, min_step, max_step = (_int_param(request, name) for name in ("max_points", "min_step", "max_step"))
    if max_points is None:
        max_points = DEFAULT_MAX_POINTS
    if not 2 <= max_points <= MAX_MAX_POINTS:
        raise ValidationError({"max_points": [f"Must be between 2 and {MAX_MAX_POINTS}."]})
    return key, max_points, min_step, max_step


def _int_param(request: Request, name: str) -> int | None:
    """The query parameter as an integer; None when absent or empty."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValidationError({name: ["Must be an integer."]}) from None


def _special(value: float) -> str:
    return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[kind_of(value)]


def _csv_rows(run: Run, keys: list[str]) -> Iterator[str]:
    writer = line_writer()
    yield writer.writerow(["key", "step", "value"])
    for key in keys:
        for step, value in selectors.full_series(run, key):
            yield writer.writerow([key, step, value if math.isfinite(value) else _special(value)])


class AlertFilter(django_filters.FilterSet):
    project = project_filter("run__project")

    class Meta:
        model = Alert
        fields = ["project", "run", "rule"]


class AlertViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    """Training alerts; members acknowledge them and resolve them by hand (docs/alerts.md)."""

    selector = staticmethod(selectors.alerts_for_user)
    serializer_class = AlertSerializer
    project_attr = "run.project"
    filterset_class = AlertFilter
    ordering_fields = ["opened_at"]

    @extend_schema(request=None, responses=AlertSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request: Request, pk: str | None = None) -> Response:
        """Mark an open alert seen: it stays open until its condition clears or someone resolves it."""
        alert = alerts.alert_acknowledge(actor=request.user, alert=self.get_object())
        return Response(AlertSerializer(alert).data)

    @extend_schema(request=None, responses=AlertSerializer)
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, pk: str | None = None) -> Response:
        """Close an open alert by hand; its rule does not open it again while the condition lasts."""
        alert = alerts.alert_resolve(actor=request.user, alert=self.get_object())
        return Response(AlertSerializer(alert).data)


class AlertRuleFilter(django_filters.FilterSet):
    project = project_filter()

    class Meta:
        model = AlertRule
        fields = ["project", "rule"]


class ProjectSettingViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                            mixins.UpdateModelMixin, mixins.DestroyModelMixin, ScopedViewSet):
    """A project's setting, written by its admins through the setting's service; it never moves to another
    project."""

    write_role = Role.ADMIN
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    noun: str  # "An alert rule", for the refusal of a move

    def new(self, project: Project) -> Model:
        raise NotImplementedError

    def save(self, obj: Model, values: dict) -> Model:
        raise NotImplementedError

    def remove(self, obj: Model) -> None:
        raise NotImplementedError

    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        # The caller's role in the named project first: one who may not write it gets 403 whatever the body holds,
        # and learns nothing from a 400 about the rest of it. A project it cannot see is left to the serializer.
        named = request.data.get("project") if isinstance(request.data, Mapping) else None
        project = project_for_user(request.user, named) if isinstance(named, str) else None
        if project is not None:
            self.require_role(project)
        return super().create(request, *args, **kwargs)

    def perform_create(self, serializer: Serializer) -> None:
        values = dict(serializer.validated_data)
        project = values.pop("project")
        self.require_role(project)
        serializer.instance = self.save(self.new(project), values)

    def perform_update(self, serializer: Serializer) -> None:
        values = dict(serializer.validated_data)
        if values.pop("project", serializer.instance.project) != serializer.instance.project:
            raise ValidationError({"project": [f"{self.noun} cannot move to another project."]})
        serializer.instance = self.save(serializer.instance, values)

    def perform_destroy(self, instance: Model) -> None:
        self.remove(instance)


class AlertRuleViewSet(ProjectSettingViewSet):
    """A project's thresholds and action per anomaly rule; a rule without one runs with its defaults. Project
    admins write."""

    selector = staticmethod(selectors.alert_rules_for_user)
    serializer_class = AlertRuleSerializer
    filterset_class = AlertRuleFilter
    noun = "An alert rule"

    def new(self, project: Project) -> AlertRule:
        return AlertRule(project=project)

    def save(self, obj: AlertRule, values: dict) -> AlertRule:
        return services.alert_rule_save(actor=self.request.user, rule=obj, values=values)

    def remove(self, obj: AlertRule) -> None:
        services.alert_rule_delete(actor=self.request.user, rule=obj)


class WebhookFilter(django_filters.FilterSet):
    project = project_filter()

    class Meta:
        model = Webhook
        fields = ["project"]


class WebhookViewSet(ProjectSettingViewSet):
    """Where a project's alerts are POSTed, signed (docs/alerts.md). Only project admins see and write them."""

    selector = staticmethod(selectors.webhooks_for_user)
    serializer_class = WebhookSerializer
    filterset_class = WebhookFilter
    noun = "A webhook"

    def new(self, project: Project) -> Webhook:
        return Webhook(project=project)

    def save(self, obj: Webhook, values: dict) -> Webhook:
        return services.webhook_save(actor=self.request.user, webhook=obj, values=values)

    def remove(self, obj: Webhook) -> None:
        services.webhook_delete(actor=self.request.user, webhook=obj)


class ChartPanelFilter(django_filters.FilterSet):
    project = project_filter("experiment__project")
    experiment = IdFilter(field_name="experiment_id")

    class Meta:
        model = ChartPanel
        fields = ["project", "experiment"]


class ChartPanelViewSet(ProjectSettingViewSet):
    """Chart panels saved per experiment (docs/tracking.md#chart-panels): members of its project write them."""

    selector = staticmethod(selectors.panels_for_user)
    serializer_class = ChartPanelSerializer
    filterset_class = ChartPanelFilter
    project_attr = "experiment.project"
    write_role = Role.MEMBER
    noun = "A panel"

    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        named = request.data.get("experiment") if isinstance(request.data, Mapping) else None
        experiment = (selectors.experiments_for_user(request.user).filter(pk=named).first()
                      if isinstance(named, int) and not isinstance(named, bool) else None)
        if experiment is not None:
            self.require_role(experiment.project)
        return mixins.CreateModelMixin.create(self, request, *args, **kwargs)

    def perform_create(self, serializer: Serializer) -> None:
        values = dict(serializer.validated_data)
        experiment = values.pop("experiment")
        self.require_role(experiment.project)
        serializer.instance = self.save(ChartPanel(experiment=experiment), values)

    def perform_update(self, serializer: Serializer) -> None:
        values = dict(serializer.validated_data)
        if values.pop("experiment", serializer.instance.experiment) != serializer.instance.experiment:
            raise ValidationError({"experiment": ["A panel cannot move to another experiment."]})
        serializer.instance = self.save(serializer.instance, values)

    def save(self, obj: ChartPanel, values: dict) -> ChartPanel:
        return services.panel_save(actor=self.request.user, panel=obj, values=values)

    def remove(self, obj: ChartPanel) -> None:
        services.panel_delete(actor=self.request.user, panel=obj)


class RunLogBatchView(APIView):
    """Log points, params and tags to a run, all or nothing.

    Up to 10,000 points per request (ten times MLflow's log-batch limit); a retried batch is idempotent on (run,
    key, step, attempt). With a run token, only that run, and points of the token's attempt (or of an earlier
    attempt's, delivered late); with a user's token or session, a run of a project where the caller is a member or
    above, and points of the run's current attempt or an earlier one. A refused batch writes nothing and names the
    bad point."""

    authentication_classes = AUTHENTICATION_CLASSES
    permission_classes = [UserOrAttempt]
    throttle_classes = [LoggingThrottle]
    parser_classes = [BatchJSONParser, FormParser, MultiPartParser]

    @extend_schema(request=LogBatchSerializer, responses={200: None})
    def post(self, request: Request, pk: int) -> Response:
        credential = run_credential(request)
        if credential is not None and credential.run.pk != pk:
            raise PermissionDenied("A run token writes only its own run.")
        body = body_of(request)
        if not isinstance(body, dict):
            raise ValidationError({"body": ["Must be an object with metrics, params and tags."]})
        unknown = sorted(set(body) - {"metrics", "params", "tags", "attempt"})
        if unknown:
            raise ValidationError({name: ["Unknown field."] for name in unknown})
        attempt = body.get("attempt")
        if attempt is not None and (isinstance(attempt, bool) or not isinstance(attempt, int)
                                    or not 1 <= attempt <= MAX_ATTEMPT):
            raise ValidationError({"attempt": [f"Must be an integer from 1 to {MAX_ATTEMPT}."]})
        try:
            count = services.run_log_batch(run_id=pk, metrics=body.get("metrics"), params=body.get("params"),
                                           tags=body.get("tags"), attempt=attempt,
                                           token_attempt=credential.attempt if credential else None,
                                           check=None if credential else writer_check(request.user))
        except BatchError as e:
            raise ValidationError({e.field: [e.message]}) from None
        return Response({"points": count})


def writer_check(user: User) -> Callable[[Run | None], None]:
    """Whether the user may write the run, checked on the row services.run_log_batch reads under its lock: 404 when
    it is not theirs to see (or does not exist), 403 for a viewer or another member's job's run
    (check_run_writer). The run is read once, where a check beforehand read it twice (about an eighth of a
    1,000-point batch's CPU); a batch refused for its contents is refused only after this check, so a refusal
    tells nothing about another tenant's run."""
    def check(run: Run | None) -> None:
        role = None if run is None else selectors.role_for_run(user, run)
        if run is None or role is None:
            raise NotFound("No such run.")
        check_run_writer(run, user, role)

    return check
