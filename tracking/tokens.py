"""Run tokens: what a job attempt's process logs with. A token names a run and an attempt of its job, signed with
the server's secret, so any backend can compute it at dispatch and a forged one is refused without a table. It
writes only its own run, reads nothing but that run, and is valid while its attempt is the job's current, open one
(`tracking.auth`): ending the attempt revokes it, so a pod of an ended attempt writes nothing more."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.crypto import constant_time_compare, salted_hmac

PREFIX = "tdr_"
_SALT = "tidal.tracking.run-token.attempt"
_SHAPE = re.compile(r"tdr_(\d{1,18})_(\d{1,5})_([0-9a-f]{64})", re.ASCII)


@dataclass(frozen=True)
class RunTokenClaim:
    """What a genuine run token says: its run and the number of the attempt it was given to."""

    run_id: int
    attempt: int


def run_token(run_id: int, attempt: int) -> str:
    return f"{PREFIX}{run_id}_{attempt}_{_signature(run_id, attempt)}"


def claim_of(secret: str) -> RunTokenClaim | None:
    """The run and attempt a token was issued for, or None when it is not a genuine run token."""
    shape = _SHAPE.fullmatch(secret)
    if shape is None:
        return None
    run_id, attempt = int(shape[1]), int(shape[2])
    return RunTokenClaim(run_id, attempt) if constant_time_compare(shape[3], _signature(run_id, attempt)) else None


def _signature(run_id: int, attempt: int) -> str:
    return salted_hmac(_SALT, f"{run_id}:{attempt}", algorithm="sha256").hexdigest()
