"""The credential a job attempt's own process is given, at the doors that take it.

The app that issues it (tracking: the run token, `tracking/tokens.py`) registers its DRF authentication class here
in its AppConfig.ready(); jobs knows only what such a credential proves: a job and one of its attempts, checked to
be the job's current, open attempt when it was presented. Jobs takes it on the checkpoint report of that job
(`POST /api/v1/jobs/<id>/checkpoint/`); tracking on the run's logging.
"""

from __future__ import annotations

from dataclasses import dataclass

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, permissions

from core.hooks import Hook
from tenancy.auth import BearerTokenAuthentication
from tenancy.throttling import PerUserRateThrottle


@dataclass(frozen=True)
class AttemptCredential:
    """`request.auth` of a request made with an attempt's credential."""

    job_id: int
    attempt: int  # its number


# `cls().authenticate(request)` answers (user, an AttemptCredential) for its credentials, None for others, and raises
# AuthenticationFailed for a bad one. Apps connect their class in their AppConfig.ready().
attempt_authentications: Hook[type[authentication.BaseAuthentication]] = Hook("jobs.auth.attempt_authentications")


def attempt_credential(request) -> AttemptCredential | None:
    return request.auth if isinstance(request.auth, AttemptCredential) else None


class AttemptAuthentication(authentication.BaseAuthentication):
    """An attempt's credential, by whichever registered class knows it; other credentials are left to the
    authentication classes after it."""

    def authenticate(self, request):
        for cls in attempt_authentications:
            found = cls().authenticate(request)
            if found is not None:
                return found
        return None

    def authenticate_header(self, request) -> str:
        return "Bearer"


# The doors that take an attempt's credential: it first (it would fail as a user token), then users'.
AUTHENTICATION_CLASSES = [AttemptAuthentication, BearerTokenAuthentication, authentication.SessionAuthentication]


class AttemptTokenScheme(OpenApiAuthenticationExtension):
    """Describes attempts' credentials (run tokens) in the OpenAPI schema."""

    target_class = "jobs.auth.AttemptAuthentication"
    name = "runToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A job attempt's run token (tdr_...): logs to its job's run and reports the attempt's "
                               "checkpoint, while the attempt is the job's current one."}


class UserOrAttempt(permissions.BasePermission):
    """A signed-in user, or an attempt's credential (which the views then hold to its own job or run)."""

    def has_permission(self, request, view) -> bool:
        return bool(attempt_credential(request) or (request.user and request.user.is_authenticated))


class AttemptThrottle(PerUserRateThrottle):
    """A job's own process has its own, higher allowance per attempt (TIDAL_TRACKING_THROTTLE_RATE, the `run`
    rate), so the API limit never cuts its logging off; users keep theirs."""

    def scope_of(self, request) -> str:
        return "run" if attempt_credential(request) else super().scope_of(request)

    def ident_of(self, request) -> str:
        credential = attempt_credential(request)
        return f"attempt-{credential.job_id}-{credential.attempt}" if credential else super().ident_of(request)
