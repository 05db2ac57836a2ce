"""Who may read and write runs: a run token (its own run only, while its attempt is the job's current one) or a user
(by their role in the run's project)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions

from jobs.auth import AttemptCredential
from tenancy.auth import token_failure
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

