"""Who may read and write runs: a run token (its own run only) or a user (by their role in the run's project)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, permissions

from tenancy.auth import BearerTokenAuthentication, token_failure
from tenancy.throttling import PerUserRateThrottle
from tracking.tokens import PREFIX, run_id_from_token


@dataclass(frozen=True)
class RunCredential:
    """`request.auth` of a request made with a run token."""

    run_id: int


class RunTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer tdr_...`; other bearer tokens are left to the user-token authentication after it."""

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        keyword, _, secret = header.partition(" ")
        secret = secret.strip()
        if keyword != "Bearer" or not secret.startswith(PREFIX):
            return None
        run_id = run_id_from_token(secret)
        if run_id is None:
            raise token_failure(request, "Invalid run token.")
        return AnonymousUser(), RunCredential(run_id)

    def authenticate_header(self, request) -> str:
        return "Bearer"


class RunTokenScheme(OpenApiAuthenticationExtension):
    """Describes run tokens in the OpenAPI schema."""

    target_class = "tracking.auth.RunTokenAuthentication"
    name = "runToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A job's run token (tdr_...): writes only its own run."}


def run_credential(request) -> RunCredential | None:
    return request.auth if isinstance(request.auth, RunCredential) else None


class UserOrRunToken(permissions.BasePermission):
    """A signed-in user, or a run token (which the views then hold to its own run)."""

    def has_permission(self, request, view) -> bool:
        return bool(run_credential(request) or (request.user and request.user.is_authenticated))


class RunTokenThrottle(PerUserRateThrottle):
    """A training job's logging has its own, higher allowance per run (TIDAL_TRACKING_THROTTLE_RATE), so the API
    limit never cuts it off; users keep theirs."""

    def scope_of(self, request) -> str:
        return "run" if run_credential(request) else super().scope_of(request)

    def ident_of(self, request) -> str:
        credential = run_credential(request)
        return f"run-{credential.run_id}" if credential else super().ident_of(request)


# The tracking endpoints' authentication: a run token first (it would fail as a user token), then users'.
AUTHENTICATION_CLASSES = [RunTokenAuthentication, BearerTokenAuthentication, authentication.SessionAuthentication]
