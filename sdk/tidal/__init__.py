"""Experiment tracking for Tidal: `run = tidal.init(project=..., experiment=..., params=...)`,
`tidal.log({"loss": 1.2}, step=100)`, `tidal.finish()`; inside a job, `tidal.checkpoint(path, step)` tells the job's
next attempt what to resume from.

Logging never blocks or crashes training: `log()` only queues; a daemon thread sends batches, retries, and keeps
what the server cannot take yet in a spool file sent later. Inside a Tidal job `tidal.init()` continues the job's
run. Only rank 0 logs unless `all_ranks=True`. See docs/sdk.md.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from time import monotonic, sleep
from types import FrameType, TracebackType
from typing import Any

import httpx
from tidal_cli.digits import is_digits

from tidal.config import Options, Target, TidalError, job_target, rank, user_credentials
from tidal.run import NoOpRun, Run
from tidal.sender import error_of

__all__ = ["NoOpRun", "Run", "TidalError", "checkpoint", "finish", "flush", "get_run", "init", "log", "log_params",
           "log_tags"]

_log = logging.getLogger("tidal")
_current: Run | NoOpRun | None = None
_active: list[Run] = []
_state = {"hooks": False, "crashed": False}
_previous_sigterm: Any = None


def init(project: str | None = None, experiment: str | None = None, name: str | None = None,
         params: Mapping[str, Any] | None = None, tags: Mapping[str, Any] | None = None, *,
         run_id: int | None = None, url: str | None = None, token: str | None = None, all_ranks: bool = False,
         system_interval: float | None = None, **options: Any) -> Run | NoOpRun:
    """Start logging a run and make it the current one (`tidal.log` writes to it).

    - Inside a Tidal job (TIDAL_RUN_ID and TIDAL_RUN_TOKEN set) and without `run_id`, `url` or `token`: the job's
      run, with its run token; `project`, `experiment` and `name` are then the job's own and are ignored.
    - With `run_id`: that existing run, with the user's token.
    - Otherwise: a new run in `project` (default: the CLI's default project) and `experiment` (default
      "Default"), created through the API with the URL and token the `tidal` CLI uses (TIDAL_URL / TIDAL_TOKEN
      win over `tidal login`'s config). Raises TidalError when it cannot be created.

    `params` and `tags` are logged to the run. On ranks other than 0 (RANK, else LOCAL_RANK) this returns a
    NoOpRun unless `all_ranks=True`. System metrics are sampled every `system_interval` seconds (default 10; 0
    turns them off). It prints the run's page on stderr once (`quiet=True` or TIDAL_QUIET=1: not). Other keyword
    options tune the sender (see tidal.config.Options)."""
    global _current
    opts = Options().with_overrides({"system_interval": system_interval, **options})
    if not all_ranks and rank() != 0:
        _current = NoOpRun()
        return _current
    if isinstance(_current, Run) and not _current.finished:
        _current.finish(status=None)  # a new init ends the previous run's logging from this process
    job = job_target()
    info: dict[str, Any] = {}
    if job is not None and run_id is None and url is None and token is None:
        target, pending = job, (params, tags)
    elif run_id is not None:
        base, secret, _ = user_credentials(url, token)
        target, pending = Target(base, secret, int(run_id), run_token=secret.startswith("tdr_")), (params, tags)
    else:
        base, secret, default_project = user_credentials(url, token)
        project = project or default_project
        if not project:
            raise TidalError("tidal.init() needs a project: pass project=..., or set a default with "
                             "`tidal login --project SLUG` (or TIDAL_PROJECT).")
        body = {"project": project, "experiment": experiment or "", "name": name or "",
                "params": _strings(params), "tags": _strings(tags)}
        info = _create_run(base, secret, body, opts)
        target, pending = Target(base, secret, int(info["id"])), (None, None)
    run = Run(target, opts, info)
    if pending[0]:
        run.log_params(pending[0])
    if pending[1]:
        run.log_tags(pending[1])
    _active.append(run)
    _current = run
    _install_hooks()
    if not (opts.quiet or os.environ.get("TIDAL_QUIET", "") not in ("", "0")):
        _print_link(run)
    return run


def _print_link(run: Run) -> None:
    """One line on stderr with the run's page, as W&B prints its run's; tidal.init(quiet=True) or TIDAL_QUIET=1
    leaves it out."""
    name = run.info.get("name")
    named = f" {json.dumps(name, ensure_ascii=False)}" if name else ""
    print(f"tidal: run {run.id}{named}: {run.url}", file=sys.stderr, flush=True)


def _strings(pairs: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): "" if v is None else str(v) for k, v in (pairs or {}).items()}


def _create_run(url: str, token: str, body: dict[str, Any], opts: Options) -> dict[str, Any]:
    """POST /runs/, retried briefly on network errors and 5xx."""
    from tidal_cli.client import error_from_response

    try:
        response = _post(url, token, "runs/", body, opts)
    except httpx.HTTPError as error:
        raise TidalError(f"Cannot create the run: cannot reach Tidal at {url} ({error})") from None
    if response.status_code >= 300:
        raise TidalError(f"Cannot create the run: {error_from_response(response)}")
    return response.json()


def _post(url: str, token: str, path: str, body: dict[str, Any], opts: Options) -> httpx.Response:
    """POST to the API, tried up to four times while the server is unreachable or answers 5xx or 429: its last
    answer, or the network error of the last try."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json", "User-Agent": "tidal-sdk/0.1"}
    delay = opts.backoff
    with httpx.Client(base_url=url + "/api/v1/", headers=headers, timeout=opts.timeout) as http:
        for _ in range(3):
            try:
                response = http.post(path, json=body)
                if response.status_code < 500 and response.status_code != 429:
                    return response
            except httpx.HTTPError:
                pass
            sleep(delay)
            delay = min(delay * 2, opts.max_backoff)
        return http.post(path, json=body)  # the last try: its answer, or its error


def checkpoint(path: str, step: int | None = None, **options: Any) -> bool:
    """Report a checkpoint the job just saved, once it is complete on storage: the job's next attempt (after a
    preemption, a failure, a restart) is given the latest one reported, `path` in TIDAL_RESUME_FROM and `step` in
    TIDAL_RESUME_STEP, to resume from.

    Inside a Tidal job, from rank 0 (other ranks report nothing and return False). It reports with the attempt's
    run token and waits for the server (a few tries, `timeout` seconds each: see tidal.config.Options); it never
    raises. Returns True when the server recorded it, else False with a warning (outside a job, an attempt that
    has ended, the server unreachable). Needs no tidal.init()."""
    if rank() != 0:
        return False
    job, job_id = job_target(), os.environ.get("TIDAL_JOB_ID", "")
    if job is None or not is_digits(job_id):
        _log.warning("tidal: tidal.checkpoint() reports to a Tidal job (TIDAL_RUN_TOKEN, TIDAL_JOB_ID); outside "
                     "one nothing is reported")
        return False
    body: dict[str, Any] = {"checkpoint": str(path)}
    if step is not None:
        body["step"] = int(step)
    try:
        response = _post(job.url, job.token, f"jobs/{job_id}/checkpoint/", body, Options().with_overrides(options))
    except httpx.HTTPError as error:
        _log.warning("tidal: checkpoint %s not reported: cannot reach %s (%s)", path, job.url, error)
        return False
    if response.status_code >= 300:
        _log.warning("tidal: checkpoint %s not reported: HTTP %d: %s", path, response.status_code,
                     error_of(response)[1])
        return False
    return True


def get_run() -> Run | NoOpRun | None:
    """The current run (the last tidal.init()), or None."""
    return _current


def _run_or_warn() -> Run | NoOpRun | None:
    if _current is None and "no-init" not in _state:
        _state["no-init"] = True
        _log.warning("tidal: call tidal.init() before tidal.log(); nothing is logged")
    return _current


def log(metrics: Mapping[str, Any], step: int | None = None) -> None:
    """Log metrics to the current run (see Run.log): `tidal.log({"loss": 1.2, "lr": 3e-4}, step=100)`."""
    run = _run_or_warn()
    if run is not None:
        run.log(metrics, step)


def log_params(params: Mapping[str, Any]) -> None:
    """Log params to the current run (see Run.log_params)."""
    run = _run_or_warn()
    if run is not None:
        run.log_params(params)


def log_tags(tags: Mapping[str, Any]) -> None:
    """Log tags to the current run."""
    run = _run_or_warn()
    if run is not None:
        run.log_tags(tags)


def flush(timeout: float | None = None) -> bool:
    """Send what the current run has queued; wait at most `timeout` seconds."""
    return _current.flush(timeout) if _current is not None else True


def finish(status: str | None = "FINISHED", *, timeout: float | None = None) -> None:
    """Finish the current run: send everything, then set its status (FINISHED, FAILED, KILLED)."""
    if _current is not None:
        _current.finish(status, timeout=timeout)
        if _current in _active:
            _active.remove(_current)


def _finish_all(status: str, deadline: float | None) -> None:
    """Finish every run still open, sharing one deadline."""
    end = None if deadline is None else monotonic() + deadline
    for run in list(_active):
        left = None if end is None else max(end - monotonic(), 0.1)
        try:
            run.finish(status, timeout=left)
        except Exception:
            _log.warning("tidal: finishing run %s failed", run.id, exc_info=True)
        _active.remove(run)


def _at_exit() -> None:
    _finish_all("FAILED" if _state["crashed"] else "FINISHED", None)


def _excepthook(kind: type[BaseException], value: BaseException, traceback: TracebackType | None) -> None:
    _state["crashed"] = not issubclass(kind, KeyboardInterrupt)
    _previous_excepthook(kind, value, traceback)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Flush (within each run's sigterm_deadline), mark the runs KILLED, then do what SIGTERM did before."""
    deadline = max((run.options.sigterm_deadline for run in _active), default=0.0)
    _finish_all("KILLED", deadline)
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the default: die of SIGTERM
    os.kill(os.getpid(), signal.SIGTERM)


_previous_excepthook = sys.excepthook


def _install_hooks() -> None:
    """Once per process: the exit flush, the crash marker and (from the main thread only) the SIGTERM flush."""
    global _previous_sigterm, _previous_excepthook
    if _state["hooks"]:
        return
    _state["hooks"] = True
    atexit.register(_at_exit)
    _previous_excepthook = sys.excepthook
    sys.excepthook = _excepthook
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        previous = signal.getsignal(signal.SIGTERM)
        if previous == signal.SIG_IGN:  # the process ignores SIGTERM: so does tidal
            return
        _previous_sigterm = previous
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        pass
