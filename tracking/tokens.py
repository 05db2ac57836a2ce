"""Run tokens: what a job's process logs with. A token names one run and is signed with the server's secret, so
it is checked without a table and any backend can compute it at dispatch. It writes only its own run and reads
nothing but that run; it stops writing when the run finishes."""

from __future__ import annotations

from django.utils.crypto import constant_time_compare, salted_hmac

PREFIX = "tdr_"
_SALT = "tidal.tracking.run-token"


def run_token(run_id: int) -> str:
    return f"{PREFIX}{run_id}_{_signature(run_id)}"


def run_id_from_token(secret: str) -> int | None:
    """The run a token was issued for, or None when it is not a valid run token."""
    if not secret.startswith(PREFIX):
        return None
    run_part, _, signature = secret[len(PREFIX):].partition("_")
    if not run_part.isdigit() or len(run_part) > 18:
        return None
    run_id = int(run_part)
    return run_id if constant_time_compare(signature, _signature(run_id)) else None


def _signature(run_id: int) -> str:
    return salted_hmac(_SALT, str(run_id), algorithm="sha256").hexdigest()
