"""`Authorization: Bearer <token>` for the API and CLI."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from core.hooks import Hook
from tenancy import authcache, throttling
from tenancy.models import ApiToken, hash_token

# Writing last_used_at on every request would turn every read into a write; once a minute is precise enough.
LAST_USED_RESOLUTION = timedelta(minutes=1)
READ_ONLY_MESSAGE = "This token is read-only."


@dataclass(frozen=True)
class OtherCredential:
    """A credential of another door: `is_valid(secret)` tells a genuine one; `refusal` is what this API answers it."""

    is_valid: Callable[[str], bool]
    refusal: str


# Credentials of other doors that apps above connect (tracking's run tokens): a valid one used here is refused as the
# wrong kind of token, not counted as a guess against the client's address.
other_credentials: Hook[OtherCredential] = Hook("tenancy.auth.other_credentials")


def _other_credential_refusal(secret: str) -> str | None:
    return next((other.refusal for other in other_credentials if other.is_valid(secret)), None)


def _token_from_db(digest: str) -> ApiToken | None:
    try:  # get(), not first(): the digest is unique, and an ORDER BY would only cost compiling it
        return ApiToken.objects.select_related("user").get(digest=digest)
    except ApiToken.DoesNotExist:
        return None


def token_failure(request, message: str) -> exceptions.APIException:
    """A failed bearer token, counted against the client's address (tenancy.throttling): 401, or 429 once the
    address is locked out. Only failures are: a valid token is served whatever failed from its address."""
    wait = throttling.token_failed(request)
    if wait is not None:
        return exceptions.Throttled(wait=wait, detail="Too many failed bearer tokens from your address; try again "
                                    f"in {throttling.wait_text(wait)}.")
    return exceptions.AuthenticationFailed(message)


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        keyword, _, secret = header.partition(" ")
        if keyword != self.keyword:
            return None
        secret = secret.strip()
        if not secret or " " in secret:
            raise token_failure(request, "Malformed Authorization header; use: Bearer <token>.")
        digest = hash_token(secret)
        epoch = authcache.current_epoch()
        token = authcache.tokens.get(digest, epoch)
        changed = token is None
        if token is None:
            refusal = _other_credential_refusal(secret)
            if refusal is not None:
                raise exceptions.AuthenticationFailed(refusal)
            token = _token_from_db(digest)
        if token is None or not token.is_active or not token.user.is_active:  # expiry is checked on every request
            raise token_failure(request, "Invalid, expired or revoked token.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at, changed = now, True
        if changed:
            authcache.tokens.put(digest, epoch, token)
        # Here rather than in a permission class: every view that accepts these tokens authenticates through this
        # class, while views may replace the permission classes (the tracking ones do).
        if token.read_only and request.method not in permissions.SAFE_METHODS:
            raise exceptions.PermissionDenied(READ_ONLY_MESSAGE, code="read_only_token")
        return token.user, token

    def authenticate_header(self, request) -> str:
        return self.keyword


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Describes the Bearer token in the OpenAPI schema."""

    target_class = "tenancy.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A personal API token (tdl_...)."}
