"""Typed readers for environment variables.

Each reader fails loudly (ImproperlyConfigured naming the variable) on a value it cannot parse, so a typo in a
deployment stops the process at start-up instead of silently falling back to a default.

An empty variable is an unset one, for every reader: `.env.example` lists every variable, many of them empty
(`DATABASE_URL=`), and docker compose and `make` pass them on as empty strings.

Secrets are read by `env_secret`, which also takes them from a file named by `<NAME>_FILE` (Docker and Kubernetes
secrets are mounted as files, and a file keeps the secret out of the process environment and `ps e`).
"""

from __future__ import annotations

import os
from ipaddress import ip_network
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from core.digits import is_digits

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str) -> str | None:
    """The variable's value, None when it is unset or empty."""
    value = os.environ.get(name)
    return None if value is None or value.strip() == "" else value


def env_str(name: str, default: str | None = None) -> str:
    value = _raw(name)
    if value is None:
        if default is None:
            raise ImproperlyConfigured(f"{name} must be set")
        return default
    return value


def env_secret(name: str, default: str | None = None) -> str:
    """A secret from `name`, or from the file `<name>_FILE` names (its content without the final newline).
    Both set is refused: which one wins would be a guess."""
    value, path = _raw(name), _raw(f"{name}_FILE")
    if value is not None and path is not None:
        raise ImproperlyConfigured(f"Set {name} or {name}_FILE, not both")
    if path is not None:
        try:
            value = Path(path).read_text(encoding="utf-8").strip() or None
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE names a file that cannot be read: {exc}") from None
    if value is None:
        if default is None:
            raise ImproperlyConfigured(f"{name} (or {name}_FILE) must be set")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = _raw(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no, on/off), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = _raw(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str, default: list[str]) -> list[str]:
    """A comma-separated list of IP addresses and networks (CIDRs, e.g. ``10.0.0.0/8,::1``)."""
    entries = env_list(name, default)
    for entry in entries:
        try:
            ip_network(entry, strict=False)
        except ValueError:
            raise ImproperlyConfigured(f"{name} must list IP addresses or networks (CIDR), got {entry!r}") from None
    return entries


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = _raw(name) or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def env_rate(name: str, default: str) -> str:
    """A DRF throttle rate such as ``100/min``."""
    value = _raw(name) or default
    count, _, period = value.partition("/")
    if not is_digits(count) or period not in {"s", "sec", "second", "m", "min", "minute", "h", "hour", "d", "day"}:
        raise ImproperlyConfigured(f"{name} must look like 100/min (count/second|minute|hour|day), got {value!r}")
    return value


# Fragments of the placeholders that examples, documentation and earlier versions of .env.example used, and
# Django's own generated development keys: everyone knows them, so they protect nothing.
PLACEHOLDER_FRAGMENTS = ("change-me", "changeme", "change_me", "replace-me", "your-secret", "django-insecure-",
                         "dev-only-insecure", "build-only")
MIN_SECRET_LENGTH = 32


def require_strong_secret(name: str, value: str, *, min_length: int = MIN_SECRET_LENGTH) -> None:
    """Refuse a known placeholder, or a value too short or too uniform to be random (ImproperlyConfigured naming
    the variable, never the value)."""
    how = "set a long random value, e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'"
    lowered = value.lower()
    if any(fragment in lowered for fragment in PLACEHOLDER_FRAGMENTS):
        raise ImproperlyConfigured(f"{name} is a placeholder from an example, not a secret: {how}")
    if len(value) < min_length or len(set(value)) < 5:
        raise ImproperlyConfigured(f"{name} is too short or too uniform to be a secret (at least {min_length} "
                                   f"random characters): {how}")
