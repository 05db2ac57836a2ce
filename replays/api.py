"""REST API for replay runs: platform staff create them; everybody sees only the runs they created (staff all).

    POST /api/v1/replays/             multipart (trace file, cluster/quotas file or `current`) or JSON
                                      ({"source": "history", "days": 7, ...}); 201 with the queued run
    GET  /api/v1/replays/<id>/        progress (0-1), ETA, status, summaries and comparisons
    GET  /api/v1/replays/<id>/report/ the self-contained HTML report
"""

from __future__ import annotations

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from core.parsers import FormParser, JSONParser, MultiPartParser
from replays import runs, selectors, services
from replays.serializers import ReplayCreateSerializer, ReplayRunSerializer
from tenancy.scoping import ScopedViewSet


class FileWhateverAccepted(BaseContentNegotiation):
    """The report is an HTML file whatever the client accepts (a browser asks for text/html, a script for anything),
    and a refusal stays JSON. Negotiating between a JSON and an HTML renderer sent refusals as text/html."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ReplayRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, ScopedViewSet):
    selector = staticmethod(selectors.runs_for_user)
    serializer_class = ReplayRunSerializer
    project_attr = None
    parser_classes = [JSONParser, MultiPartParser, FormParser]
    filterset_fields = ["status", "kind"]
    ordering_fields = ["created_at", "id"]

    def get_serializer_class(self):
        return ReplayCreateSerializer if self.action == "create" else ReplayRunSerializer

    def check_permissions(self, request) -> None:
        super().check_permissions(request)
        if self.action == "create" and not request.user.is_staff:
            raise PermissionDenied("Only platform admins can start replays.")

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        run = services.replay_create(
            actor=request.user, trace=data.get("trace"), source=data["source"], days=data.get("days"),
            cluster=data["cluster"], quotas=data["quotas"], quota_scale=data["quota_scale"], policy=data["policy"],
            compare_with=data["compare"], skip_invalid=data["skip_invalid"], elastic=data["elastic"],
            elastic_max_factor=data["elastic_max_factor"])
        run = selectors.run_by_id(run.pk) or run  # eager mode: the task has already run after commit
        body = ReplayRunSerializer(run, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(responses={(200, "text/html"): OpenApiTypes.STR})
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer],
            content_negotiation_class=FileWhateverAccepted)
    def report(self, request, pk=None):
        run = self.get_object()
        path = runs.report_path(run)
        if path is None:
            raise NotFound(f"Replay {run.pk} has no report yet (status {run.status}).")
        return FileResponse(open(path, "rb"), content_type="text/html; charset=utf-8")
