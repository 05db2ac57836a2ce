"""A run as the training script holds it: `log()` checks and queues points (never raising, never waiting for the
network), `finish()` sends the rest and sets the run's status."""

from __future__ import annotations

import json
import logging
import math
import operator
import threading
import time
import unicodedata
from collections.abc import Mapping
from typing import Any

from tidal.config import Options, Target
from tidal.sender import Point, Sender
from tidal.system import SystemMonitor

log = logging.getLogger("tidal")
STATUSES = ("FINISHED", "FAILED", "KILLED")
MAX_KEY = 250
MAX_STEP = 2**63 - 1
MAX_PARAM_VALUE = 6_000
MAX_TAG_VALUE = 8_000


def _bad_key(key: Any) -> str | None:
    """Why the server would refuse this key (and with it the whole batch), or None."""
    if not isinstance(key, str) or not key:
        return "not a non-empty string"
    if len(key) > MAX_KEY:
        return f"longer than {MAX_KEY} characters"
    if any(unicodedata.category(c) == "Cc" for c in key):
        return "contains a control character"
    return None


def _value(value: Any) -> float | str | None:
    """A number as the API takes it ("NaN", "Infinity", "-Infinity" for the special ones), or None."""
    try:
        number = float(value)  # ints, floats, numpy scalars, one-element tensors
    except (TypeError, ValueError, OverflowError):
        return None
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return number


def _step(step: Any) -> int | None:
    """An integer step within the server's range (a float such as 100.0 counts), or None."""
    if isinstance(step, bool):
        return None
    if isinstance(step, float):
        if not step.is_integer():
            return None
        step = int(step)
    try:
        number = operator.index(step)  # ints, numpy integers, integer tensors
    except TypeError:
        return None
    return number if 0 <= number <= MAX_STEP else None


class Run:
    """A run being logged from this process. Create it with `tidal.init()`."""

    def __init__(self, target: Target, options: Options, info: dict[str, Any] | None = None) -> None:
        self.id = target.run_id
        self.url = f"{target.url}/runs/{target.run_id}/"  # its page
        self.info = info or {}
        self.target = target
        self.options = options
        self.finished = False
        self._next_step = 0
        self._lock = threading.RLock()
        self._warned: set[str] = set()
        self._sender = Sender(target, options)
        self._system = (SystemMonitor(options.system_interval, self._log_system)
                        if options.system_interval and options.system_interval > 0 else None)

    def __repr__(self) -> str:
        return f"<tidal.Run {self.id} at {self.target.url}>"

    def __enter__(self) -> Run:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: Any) -> None:
        self.finish("FINISHED" if kind is None else "KILLED" if issubclass(kind, KeyboardInterrupt) else "FAILED")

    def _warn_once(self, what: str, message: str, *args: Any) -> None:
        if what not in self._warned:
            self._warned.add(what)
            log.warning("tidal: " + message, *args)

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Queue metrics at `step` (default: one more than the last step logged, starting at 0). Returns at once;
        a value that is not a number or a bad key is skipped with a warning (once per key)."""
        try:
            self._log(metrics, step)
        except Exception:  # logging never crashes training
            if "internal" not in self._warned:
                self._warned.add("internal")
                log.warning("tidal: log() failed; the SDK's error follows", exc_info=True)

    def _log(self, metrics: Mapping[str, Any], step: Any) -> None:
        if self.finished:
            self._warn_once("finished", "run %s is finished: log() after finish() is ignored", self.id)
            return
        if not isinstance(metrics, Mapping):
            self._warn_once("type", "log() takes a dict of metric names to numbers, not %s", type(metrics).__name__)
            return
        with self._lock:
            number: int | None
            if step is None:
                number = self._next_step
            else:
                number = _step(step)
                if number is None:
                    self._warn_once(f"step:{step!r}", "step %r is not an integer between 0 and 2**63-1: these "
                                    "metrics are skipped", step)
                    return
            self._next_step = number + 1
        now = int(time.time() * 1000)
        points: list[Point] = []
        for key, raw in metrics.items():
            problem = _bad_key(key)
            value = None if problem else _value(raw)
            if problem or value is None:
                self._warn_once(f"key:{key!r}", "metric %r is skipped: %s", key, problem or
                                f"its value {str(raw)[:40]!r} is not a number")
                continue
            points.append({"key": key, "value": value, "step": number, "timestamp": now})
        self._sender.add_points(points)

    def _log_system(self, values: dict[str, float], step: int) -> None:
        if not self.finished:
            now = int(time.time() * 1000)
            self._sender.add_points([{"key": k, "value": _value(v), "step": step, "timestamp": now}
                                     for k, v in values.items() if _value(v) is not None])

    def _pairs(self, pairs: Mapping[str, Any], limit: int, what: str) -> dict[str, str]:
        clean = {}
        for key, value in pairs.items():
            text = json.dumps(value) if isinstance(value, (dict, list, tuple)) else "" if value is None else str(value)
            problem = _bad_key(key) or (f"its value is longer than {limit} characters" if len(text) > limit else None)
            if problem:
                self._warn_once(f"{what}:{key!r}", "%s %r is skipped: %s", what, key, problem)
                continue
            clean[key] = text
        return clean

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Queue params (hyperparameters). As in MLflow a param is set once: logging another value for it is
        refused by the server (with a warning here) and the other params of that call are dropped with it."""
        if not self.finished and params:
            self._sender.add_record({"params": self._pairs(params, MAX_PARAM_VALUE, "param")})

    def log_tags(self, tags: Mapping[str, Any]) -> None:
        """Queue tags (free key/values that may change)."""
        if not self.finished and tags:
            self._sender.add_record({"tags": self._pairs(tags, MAX_TAG_VALUE, "tag")})

    def flush(self, timeout: float | None = None) -> bool:
        """Send what is queued and wait (at most `timeout` seconds) until it was sent or spooled."""
        return self._sender.flush(timeout)

    def finish(self, status: str | None = "FINISHED", *, timeout: float | None = None) -> None:
        """Send everything queued (at most `timeout` seconds, default `exit_deadline`; the rest goes to the spool),
        then set the run's status: FINISHED, FAILED or KILLED, or None to leave it running. Inside a Tidal job the
        job's own end sets the status. Calling it again does nothing."""
        if status is not None and str(status).upper() not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)} (or None), not {status!r}")
        with self._lock:
            if self.finished:
                return
            self.finished = True
        if self._system:
            self._system.stop()
        self._sender.close(self.options.exit_deadline if timeout is None else timeout,
                          status=str(status).upper() if status else None)


class NoOpRun:
    """What ranks other than 0 get (unless `tidal.init(all_ranks=True)`): every call does nothing."""

    id = None
    url = None
    finished = False

    def __repr__(self) -> str:
        return "<tidal.NoOpRun>"

    def __enter__(self) -> NoOpRun:
        return self

    def __exit__(self, *_: Any) -> None:
        self.finished = True

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Does nothing."""

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Does nothing."""

    def log_tags(self, tags: Mapping[str, Any]) -> None:
        """Does nothing."""

    def flush(self, timeout: float | None = None) -> bool:
        return True

    def finish(self, status: str | None = "FINISHED", *, timeout: float | None = None) -> None:
        self.finished = True
