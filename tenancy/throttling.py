"""Rate limits per user (whichever of their tokens or their session they call with), or per client address when
anonymous; lockouts after repeated failed sign-ins and bearer tokens; and a limit on password reset requests.

A counter per caller and fixed window, one atomic increment in the cache (Redis in production), instead of DRF's
SimpleRateThrottle, which reads and rewrites the list of every request's timestamp in the window on every request
(at 3,000/min, a 3,000-entry pickle through Redis per request). A fixed window lets a caller spend up to twice its
rate across a window boundary, the usual trade of counter-based limits.

Lockouts count events the same way, and never refuse a valid credential for someone else's failures:

- Sign-ins count wrong passwords per account: those of each browser the account signed in with before (it holds a
  signed device cookie naming the account) on their own, and those of every other client together, whatever their
  address (a guesser gets no fresh allowance per address). The failure that reaches the limit (TIDAL_LOCKOUT) locks
  that key out for the cool-off, even for the right password (otherwise guessing would just go on), and writes an
  audit entry. So a guesser behind a colleague's office NAT locks out only the clients the account never signed in
  with, not the colleague's own browser; a device is locked out only by its own failures.
- Bearer tokens count failures per client address, and a locked-out address has only its failures answered 429: a
  valid token is always served, whoever failed from the same address. Tokens hold 256 random bits, so guessing one
  is not the risk: the limit tells a scanning client to back off (429, Retry-After) and puts it in the audit log.
- Password reset requests count per account and per client address; past either limit they are refused (no mail).

A locked-out key's attempts are refused without being checked or counted; after the cool-off it starts from zero.
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
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
    """The counter's and the lock's cache keys (hashed: a username may hold any character)."""
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


def _count(kind: str, ident: str, limit: int) -> bool:
    """Count an event (a failure, a request); True when it locked the key out (only one does, however many race)."""
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
        logger.warning("counter unavailable; event not counted", exc_info=True)
        return False


def _audit_lockout(action: str, *, target: Any, about: str, address: str, failures: int, **more: Any) -> None:
    # Imported here: DRF imports the authentication classes (tenancy.auth, which uses this module) while importing
    # its views, which core.errors, a dependency of the audit log, imports.
    from tenancy.audit import audit_record

    audit_record(actor=None, action=action, target=target, about=about,
                 changes={"address": address, "failures": failures,
                          "cool_off_seconds": settings.TIDAL_LOCKOUT["COOL_OFF"], **more})
    logger.warning("%s: %s locked out after %d failures", action, about, failures)


def wait_text(seconds: float) -> str:
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


# ------------------------------------------------------------------------------------------------------ sign-ins

DEVICE_COOKIE = "tidal_device"
DEVICE_MAX_AGE = 365 * 86400
_DEVICE_SALT = "tidal.tenancy.sign-in-device"


def _account(username: str) -> str:
    # Case-folded: "Alice" must not bring a fresh count for alice where usernames match without case.
    return username.strip().casefold()


def _device_of(request: HttpRequest, account: str) -> str | None:
    """The browser's device id when its device cookie is genuine and names `account`, else None."""
    try:
        value = signing.loads(request.COOKIES.get(DEVICE_COOKIE, ""), salt=_DEVICE_SALT, max_age=DEVICE_MAX_AGE)
    except signing.BadSignature:
        return None
    if isinstance(value, dict) and value.get("account") == account and isinstance(value.get("device"), str):
        return value["device"]
    return None


def _login_ident(request: HttpRequest, username: str) -> str:
    """Whose failures a sign-in counts with: a browser the account signed in with before, its own; every other
    client of the account, together."""
    account = _account(username)
    device = _device_of(request, account)
    return f"device|{account}|{device}" if device else f"account|{account}"


def remember_device(response: HttpResponse, user: Any) -> None:
    """After a right password: the browser becomes one of the account's devices, which other clients' wrong
    passwords never lock out (one account per browser: the last one signed in)."""
    value = signing.dumps({"account": _account(user.get_username()), "device": secrets.token_urlsafe(16)},
                          salt=_DEVICE_SALT)
    response.set_cookie(DEVICE_COOKIE, value, max_age=DEVICE_MAX_AGE, secure=settings.SESSION_COOKIE_SECURE,
                        httponly=True, samesite="Lax")


def login_locked(request: HttpRequest, username: str) -> float | None:
    """Seconds sign-ins of `username` from this client stay refused, None when they are not."""
    return _locked_for("login", _login_ident(request, username))


def login_failed(request: HttpRequest, username: str) -> float | None:
    """Count a wrong password; when it locked the account out for this client (audited), the seconds it lasts."""
    limit = settings.TIDAL_LOCKOUT["LOGIN_FAILURES"]
    ident = _login_ident(request, username)
    if not _count("login", ident, limit):
        return None
    user_model = get_user_model()
    user = user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).first()
    address = client_address(request)
    _audit_lockout("login.lockout", target=user, about=f"{username[:100]} from {address}", address=address,
                   failures=limit, device=ident.startswith("device|"))
    return float(settings.TIDAL_LOCKOUT["COOL_OFF"])


def login_succeeded(request: HttpRequest, username: str) -> None:
    """A right password forgets the failures before it."""
    try:
        cache.delete(_keys("login", _login_ident(request, username))[0])
    except Exception:
        logger.warning("failure counter unavailable; not reset", exc_info=True)


# -------------------------------------------------------------------------------------------------- bearer tokens

def token_failed(request: HttpRequest) -> float | None:
    """Count an invalid bearer token from this client; the one that reaches the limit locks the address out
    (audited). Returns the seconds a locked-out address's failures are answered 429, None when it is not locked.
    Valid tokens never come here: they are served whatever failed from their address."""
    address = client_address(request)
    wait = _locked_for("token", address)
    if wait is not None:
        return wait
    limit = settings.TIDAL_LOCKOUT["TOKEN_FAILURES"]
    if _count("token", address, limit):
        _audit_lockout("token.lockout", target=None, about=f"bearer tokens from {address}", address=address,
                       failures=limit)
    return None


# ------------------------------------------------------------------------------------------------ password reset

def password_reset_refused(request: HttpRequest, email: str) -> float | None:
    """Count a password reset request for `email`; the seconds more are refused when this account or this client
    address asked too often (the request that reaches a limit still goes through), else None."""
    lockout = settings.TIDAL_LOCKOUT
    keys = [(f"account|{_account(email)}", lockout["RESETS_PER_ACCOUNT"]),
            (f"address|{client_address(request)}", lockout["RESETS_PER_ADDRESS"])]
    waits = [wait for ident, _ in keys if (wait := _locked_for("reset", ident)) is not None]
    if waits:
        return max(waits)
    for ident, limit in keys:
        _count("reset", ident, limit)
    return None
