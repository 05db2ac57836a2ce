"""Who may read and write runs: a run token (its own run only, while its attempt is the job's current one) or a user
(by their role in the run's project)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions

from core.errors import Forbidden
from jobs.auth import AttemptCredential, AttemptThrottle, attempt_credential
from tenancy.auth import token_failure
from tenancy.models import Role
from tenancy.permissions import can_manage_job, role_at_least
from tracking import selectors
from tracking.models import Run
from tracking.tokens import PREFIX, claim_of


@dataclass(frozen=True)
class RunCredential(AttemptCredential):
    """`request.auth` of a request made with a run token: its job's attempt, and its run as read when the token was
    checked."""

    run: Run


class RunTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer tdr_...`; other bearer tokens are left to the user-token authentication after it.

    A forged token counts as a failed one against the client's address; a genuine one whose attempt ended (the job
    moved on to another attempt, or finished) is refused as such, not counted: a pod of an ended attempt is no
    guesser, and its logging must stop, not lock anything out."""

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        keyword, _, secret = header.partition(" ")
        secret = secret.strip()
        if keyword != "Bearer" or not secret.startswith(PREFIX):
            return None
        claim = claim_of(secret)
        if claim is None:
            raise token_failure(request, "Invalid run token.")
        run = selectors.run_of_token(claim)
        if run is None or run.job_id is None:
            raise exceptions.AuthenticationFailed("This run token's run or job no longer exists.")
        if not run.token_attempt_open:
            raise exceptions.AuthenticationFailed(
                f"This run token is attempt {claim.attempt}'s of job {run.job_id}, which has ended: only the token of "
                "the job's current attempt is taken.", code="attempt_ended")
        return AnonymousUser(), RunCredential(run.job_id, claim.attempt, run)

    def authenticate_header(self, request) -> str:
        return "Bearer"


def run_credential(request) -> RunCredential | None:
    return request.auth if isinstance(request.auth, RunCredential) else None


def check_run_writer(run: Run, user, role: str | None) -> None:
    """Raise Forbidden unless the user, of `role` in the run's project, may write to the run (points, params, tags,
    its name and note). Any member writes a run logged outside a job. A job's run is its submitter's and the
    project's admins' (and its own run token's, which the doors check before): a colleague writing to it could stop
    the job (a NaN tripping a `stop` alert rule) or rewrite its record."""
    if not role_at_least(role, Role.MEMBER):
        raise Forbidden(f"Logging to a run needs the member role in project {run.project.slug}.")
    # A job's run is created with the job's submitter as its user: writing to it is managing the job.
    if run.job_id is not None and not can_manage_job(user, role, submitter_id=run.user_id):
        raise Forbidden(f"Run {run.pk} is the run of job {run.job_id}: only the job's submitter and the admins of "
                        f"project {run.project.slug} write to it.")


class LoggingThrottle(AttemptThrottle):
    """Logging points, params and tags: a run token's at its attempt's allowance (AttemptThrottle), and a user's too
    counted apart from their API requests, at the same tracking rate (the `run` rate, per user). MLflow's synchronous
    client sends one request per `log_metric`, faster than the API's 3,000 a minute in a tight loop; over a fixed
    window's limit it waits out the window (up to a minute, `Retry-After`), so the allowance is set above what one
    synchronous client sends rather than made to refuse it sooner or later."""

    def scope_of(self, request) -> str:
        return "run" if request.user and request.user.is_authenticated else super().scope_of(request)

    def ident_of(self, request) -> str:
        if attempt_credential(request) is None and request.user and request.user.is_authenticated:
            return f"logging-user-{request.user.pk}"
        return super().ident_of(request)
