"""Who may read and write runs: a run token (its own run only) or a user (by their role in the run's project)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, permissions

from core.errors import Forbidden
from tenancy.auth import BearerTokenAuthentication, token_failure
from tenancy.models import ROLE_RANK, Role
from tenancy.throttling import PerUserRateThrottle
from tracking.models import Run
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


def check_run_writer(run: Run, user, role: str | None) -> None:
    """Raise Forbidden unless the user, of `role` in the run's project, may write to the run (points, params, tags,
    its name and note). Any member writes a run logged outside a job. A job's run is its submitter's and the
    project's admins' (and its own run token's, which the doors check before): a colleague writing to it could stop
    the job (a NaN tripping a `stop` alert rule) or rewrite its record."""
    if role is None or ROLE_RANK[role] < ROLE_RANK[Role.MEMBER]:
        raise Forbidden(f"Logging to a run needs the member role in project {run.project.slug}.")
    # A job's run is created with the job's submitter as its user.
    if run.job_id is not None and run.user_id != user.pk and ROLE_RANK[role] < ROLE_RANK[Role.ADMIN]:
        raise Forbidden(f"Run {run.pk} is the run of job {run.job_id}: only the job's submitter and the admins of "
                        f"project {run.project.slug} write to it.")


class RunTokenThrottle(PerUserRateThrottle):
    """A training job's requests have their own, higher allowance per run (TIDAL_TRACKING_THROTTLE_RATE), so the API
    limit never cuts it off; users keep theirs."""

    def scope_of(self, request) -> str:
        return "run" if run_credential(request) else super().scope_of(request)

    def ident_of(self, request) -> str:
        credential = run_credential(request)
        return f"run-{credential.run_id}" if credential else super().ident_of(request)


class LoggingThrottle(RunTokenThrottle):
    """Logging points, params and tags: a user's too is counted apart from their API requests, at the tracking rate
    (per user). MLflow's synchronous client sends one request per `log_metric`, faster than the API's 3,000 a minute
    in a tight loop; over a fixed window's limit it waits out the window (up to a minute, `Retry-After`), so the
    allowance is set above what one synchronous client sends rather than made to refuse it sooner or later."""

    def scope_of(self, request) -> str:
        return "run" if request.user and request.user.is_authenticated else super().scope_of(request)

    def ident_of(self, request) -> str:
        if run_credential(request) is None and request.user and request.user.is_authenticated:
            return f"logging-user-{request.user.pk}"
        return super().ident_of(request)


# The tracking endpoints' authentication: a run token first (it would fail as a user token), then users'.
AUTHENTICATION_CLASSES = [RunTokenAuthentication, BearerTokenAuthentication, authentication.SessionAuthentication]
