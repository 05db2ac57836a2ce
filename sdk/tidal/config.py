"""Where to send (URL, token, run), this process's rank, and the tuning knobs of the background sender."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from tidal_cli.client import CliError, load_config
from tidal_cli.digits import is_digits


class TidalError(Exception):
    """tidal.init() could not start a run: not configured, a refused request, or the server unreachable."""


@dataclass(frozen=True)
class Options:
    """Tuning of the logging machinery; tidal.init(**options) overrides any of them (tests use small ones)."""

    batch_size: int = 10_000  # points per request: the server's limit
    flush_interval: float = 1.0  # seconds between sends when fewer than batch_size points are waiting
    max_queue: int = 100_000  # points held in memory; beyond it log() spills the queue to the spool file
    grace: float = 10.0  # seconds of failed sends before batches go to the spool instead of being retried
    backoff: float = 0.5  # first retry delay; doubles up to max_backoff
    max_backoff: float = 30.0
    timeout: float = 10.0  # seconds per HTTP request
    exit_deadline: float = 15.0  # how long the exit flush (atexit, finish) may take before spooling the rest
    sigterm_deadline: float = 5.0  # the same on SIGTERM (Kubernetes' grace period is 30 s by default)
    system_interval: float = 10.0  # seconds between system metrics; 0 turns them off
    spool_dir: str = ""  # default: TIDAL_SPOOL_DIR, else ~/.cache/tidal/spool
    quiet: bool = False  # print no link to the run at init() (also TIDAL_QUIET=1)

    def with_overrides(self, overrides: dict[str, Any]) -> Options:
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise TypeError(f"tidal.init() got unknown option(s) {', '.join(unknown)}")
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def spool_path(self) -> Path:
        chosen = self.spool_dir or os.environ.get("TIDAL_SPOOL_DIR")
        return Path(chosen) if chosen else Path.home() / ".cache" / "tidal" / "spool"


@dataclass(frozen=True)
class Target:
    """Where points go: the server, the credential and the run (with the job's attempt inside a Tidal job)."""

    url: str
    token: str
    run_id: int
    attempt: int | None = None
    run_token: bool = False  # a job's run token: writes its run only and cannot change its status


def rank() -> int:
    """This process's rank as torchrun (and most launchers) set it: RANK, else LOCAL_RANK, else 0."""
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name, "").strip()
        if is_digits(value.lstrip("-")):
            return int(value)
    return 0


def job_target() -> Target | None:
    """The job's own run (TIDAL_URL, TIDAL_RUN_ID, TIDAL_RUN_TOKEN, TIDAL_ATTEMPT), when running inside a job."""
    env = os.environ
    url, run_id, token = env.get("TIDAL_URL"), env.get("TIDAL_RUN_ID", ""), env.get("TIDAL_RUN_TOKEN")
    if not (url and token and is_digits(run_id)):
        return None
    attempt = env.get("TIDAL_ATTEMPT", "")
    return Target(url=url.rstrip("/"), token=token, run_id=int(run_id),
                  attempt=int(attempt) if is_digits(attempt) and int(attempt) > 0 else None, run_token=True)


def user_credentials(url: str | None = None, token: str | None = None) -> tuple[str, str, str | None]:
    """URL, token and default project the way the `tidal` CLI finds them (TIDAL_URL / TIDAL_TOKEN / TIDAL_PROJECT,
    then ~/.config/tidal/config.json or TIDAL_CONFIG); explicit arguments win."""
    try:
        config = load_config()
    except CliError as error:
        raise TidalError(str(error)) from None
    url, token = url or config.get("url"), token or config.get("token")
    if not url or not token:
        raise TidalError("Not logged in: run `tidal login --url URL --token TOKEN` (or set TIDAL_URL and "
                         "TIDAL_TOKEN), or pass url= and token= to tidal.init().")
    return url.rstrip("/"), token, config.get("project")
