"""Rate limits per user (whichever of their tokens or their session they call with), or per client address when
anonymous; and lockouts after repeated failed sign-ins and bearer tokens.

A counter per caller and fixed window, one atomic increment in the cache (Redis in production), instead of DRF's
SimpleRateThrottle, which reads and rewrites the list of every request's timestamp in the window on every request
(at 3,000/min, a 3,000-entry pickle through Redis per request). A fixed window lets a caller spend up to twice its
rate across a window boundary, the usual trade of counter-based limits.

Lockouts count failures the same way: a sign-in per username and client address, a bearer token per client
address. The failure that reaches the limit (TIDAL_LOCKOUT) locks the key out for the cool-off, even for the right
password or a valid token (otherwise guessing would just go on), and writes an audit entry. A locked-out key's
attempts are refused without being checked or counted; after the cool-off it starts from zero.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.http import HttpRequest
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from core.addresses import client_address

logger = logging.getLogger(__name__)

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """'3000/min' -> (3000, 60)."""
    count, period = rate.split("/")
    return int(count), PERIODS[period[0]]


def count_in_window(key: str, duration: int) -> int:
    """This event's number in the window `key` counts (which starts with its first event and lasts `duration`)."""
    try:
        return cache.incr(key)
    except ValueError:  # the window's first event, unless another process created the key meanwhile
        if cache.add(key, 1, timeout=duration + 1):
            return 1
        return cache.incr(key)


class PerUserRateThrottle(BaseThrottle):
    def allow_request(self, request, view) -> bool:
        scope = self.scope_of(request)
        # Read at request time so a changed setting (or a test's override) takes effect.
        rate = api_settings.DEFAULT_THROTTLE_RATES[scope]
        if rate is None:
            return True
        allowed, duration = parse_rate(rate)
        self.now = time.time()
        window = int(self.now // duration)
        self.window_ends = (window + 1) * duration
        try:
            return count_in_window(f"throttle_{self.ident_of(request)}_{window}", duration) <= allowed
        except Exception:  # the cache (Redis) is down: serve rather than fail every request; the limit is a guard
            logger.warning("throttle counter unavailable; request allowed", exc_info=True)
            return True

    def wait(self) -> float:
        return max(1.0, self.window_ends - self.now)

    def scope_of(self, request) -> str:
        """The DEFAULT_THROTTLE_RATES entry that limits this caller."""
        return "user" if request.user and request.user.is_authenticated else "anon"

    def ident_of(self, request) -> str:
        """Who is counted: requests with the same identity share one allowance. A user, not a token: a second token
        must not bring a fresh allowance. An address only as the proxies it came through are trusted to name it."""
        if request.user and request.user.is_authenticated:
            return f"user-{request.user.pk}"
        return f"addr-{client_address(request)}"


# ------------------------------------------------------------------------------------------------------ lockouts

def _keys(kind: str, ident: str) -> tuple[str, str]:
    """The failure counter's and the lock's cache keys (hashed: a username may hold any character)."""
    digest = hashlib.sha256(ident.encode()).hexdigest()[:32]
    return f"failures_{kind}_{digest}", f"locked_{kind}_{digest}"


def _locked_for(kind: str, ident: str) -> float | None:
    """Seconds the key stays locked out, None when it is not."""
    try:
        until = cache.get(_keys(kind, ident)[1])
    except Exception:  # the cache (Redis) is down: let the credentials be checked rather than refuse everyone
        logger.warning("lockout state unavailable; attempt allowed", exc_info=True)
        return None
    return None if until is None else max(1.0, until - time.time())


def _failed(kind: str, ident: str, limit: int) -> bool:
    """Count a failure; True when it locked the key out (only one failure does, however many race)."""
    lockout = settings.TIDAL_LOCKOUT
    counter, lock = _keys(kind, ident)
    try:
        if count_in_window(counter, lockout["WINDOW"]) < limit:
            return False
        if not cache.add(lock, time.time() + lockout["COOL_OFF"], timeout=lockout["COOL_OFF"]):
            return False
        cache.delete(counter)  # after the cool-off the key starts from zero
        return True
    except Exception:
        logger.warning("failure counter unavailable; failure not counted", exc_info=True)
        return False


def _audit_lockout(action: str, *, target: Any, about: str, address: str, failures: int) -> None:
    # Imported here: DRF imports the authentication classes (tenancy.auth, which uses this module) while importing
    # its views, which core.errors, a dependency of the audit log, imports.
    from tenancy.audit import audit_record

    audit_record(actor=None, action=action, target=target, about=about,
                 changes={"address": address, "failures": failures,
                          "cool_off_seconds": settings.TIDAL_LOCKOUT["COOL_OFF"]})
    logger.warning("%s: %s locked out after %d failures", action, about, failures)


def wait_text(seconds: float) -> str:
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def _login_ident(request: HttpRequest, username: str) -> str:
    # Case-folded: "Alice" must not bring a fresh count for alice where usernames match without case.
    return f"{username.strip().casefold()}|{client_address(request)}"


def login_locked(request: HttpRequest, username: str) -> float | None:
    """Seconds sign-ins of `username` from this client stay refused, None when they are not."""
    return _locked_for("login", _login_ident(request, username))


def login_failed(request: HttpRequest, username: str) -> float | None:
    """Count a wrong password; when it locked the username out for this client (audited), the seconds it lasts."""
    limit = settings.TIDAL_LOCKOUT["LOGIN_FAILURES"]
    if not _failed("login", _login_ident(request, username), limit):
        return None
    user_model = get_user_model()
    user = user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).first()
    address = client_address(request)
    _audit_lockout("login.lockout", target=user, about=f"{username[:100]} from {address}", address=address,
                   failures=limit)
    return float(settings.TIDAL_LOCKOUT["COOL_OFF"])


def login_succeeded(request: HttpRequest, username: str) -> None:
    """A right password forgets the failures before it."""
    try:
        cache.delete(_keys("login", _login_ident(request, username))[0])
    except Exception:
        logger.warning("failure counter unavailable; not reset", exc_info=True)


def token_locked(request: HttpRequest) -> float | None:
    """Seconds bearer tokens from this client stay refused, None when they are not."""
    return _locked_for("token", client_address(request))


def token_failed(request: HttpRequest) -> None:
    """Count an invalid bearer token; the one that reaches the limit locks the client out (audited)."""
    address = client_address(request)
    limit = settings.TIDAL_LOCKOUT["TOKEN_FAILURES"]
    if _failed("token", address, limit):
        _audit_lockout("token.lockout", target=None, about=f"bearer tokens from {address}", address=address,
                       failures=limit)
