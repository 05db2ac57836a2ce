"""REST API for pools: staff and the projects that borrowed read the figures; serving's autoscaler puts a pool's
demand with a pool token (PUT /api/v1/pools/<name>/demand/)."""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import authentication, exceptions, mixins
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools import interference, selectors, services
from pools.models import Pool
from pools.serializers import DemandSerializer, PoolSerializer
from tenancy.auth import BearerTokenAuthentication, token_failure
from tenancy.scoping import ScopedViewSet

SPAN = OpenApiParameter("span", str, enum=list(selectors.SPANS), default="24h",
                        description="The detail's `series` and `given_back` over the last hour, 24 h or 7 days.")


@extend_schema_view(retrieve=extend_schema(parameters=[SPAN]))
class PoolViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    """Pools with their demand, headroom, what they lend, what training uses and what they gave back."""

    selector = staticmethod(selectors.pools_for_user)
    serializer_class = PoolSerializer
    project_attr = None
    lookup_field = "name"
    pagination_class = None

    def get_serializer_context(self):
        context = {**super().get_serializer_context(), "detail": self.action == "retrieve"}
        if self.action == "retrieve":
            name = self.request.query_params.get("span", "24h")
            if name not in selectors.SPANS:
                raise exceptions.ValidationError({"span": [f"{name[:20]!r} is not a span; use one of "
                                                           f"{', '.join(selectors.SPANS)}."]})
            context["span"] = selectors.SPANS[name]
        return context


class PoolTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer tdp_...`: a pool token; the pool it belongs to is the credential."""

    def authenticate(self, request):
        keyword, _, secret = authentication.get_authorization_header(request).decode("latin-1").partition(" ")
        if keyword != "Bearer" or not secret.strip().startswith(services.TOKEN_PREFIX):
            return None  # a personal token: the next class authenticates it, and the view refuses its user
        pool = services.pool_for_token(secret.strip())
        if pool is None:
            raise token_failure(request, "Invalid or revoked pool token.")
        return None, pool

    def authenticate_header(self, request) -> str:
        return "Bearer"


class PoolTokenScheme(OpenApiAuthenticationExtension):
    """Describes pool tokens in the OpenAPI schema."""

    target_class = "pools.api.PoolTokenAuthentication"
    name = "poolToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A pool token (tdp_...): puts its own pool's demand, nothing else."}


def token_pool(request: Request, name: str) -> Pool:
    """The pool named `name` whose token authenticated the request: 401 without a pool token, 403 for a personal
    token, 404 for another pool's token."""
    pool = request.auth
    if not isinstance(pool, Pool):
        if request.user is not None and request.user.is_authenticated:
            raise exceptions.PermissionDenied("This takes a pool token (tdp_...), not a personal token.")
        raise exceptions.NotAuthenticated("A pool token is required: Authorization: Bearer tdp_...")
    if pool.name != name:
        raise exceptions.NotFound(f"No pool named {name!r} for this token.")
    return pool


class PoolDemandView(APIView):
    """Serving's demand in devices, put by its autoscaler with a pool token (created by staff in the admin
    console): the scheduler lends the pool's devices beyond it and its headroom."""

    # A personal token is authenticated too, so a read-only one is refused as such and a full one as the wrong kind.
    authentication_classes = [PoolTokenAuthentication, BearerTokenAuthentication]
    permission_classes: list = []

    @extend_schema(request=DemandSerializer, responses=OpenApiTypes.OBJECT)
    def put(self, request: Request, name: str) -> Response:
        pool = token_pool(request, name)
        body = DemandSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        values = body.validated_data
        with transaction.atomic():  # a latency refused leaves the demand as it was
            if "devices" in values:
                pool = services.demand_set(pool=pool, devices=values["devices"])
            miss = None
            if "p99_latency_ms" in values:
                miss = interference.report_latency(pool, values.get("nodes"), values["p99_latency_ms"],
                                                   values["latency_slo_ms"])
        return Response({"pool": pool.name, "demand": pool.demand, "demand_at": pool.demand_at,
                         "unlent_until": miss.until if miss else None})
