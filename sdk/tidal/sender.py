"""The background sender: a daemon thread that batches logged points, sends them, retries and spools.

The training thread only appends to an in-memory queue (`add_points`, `add_record`); it never waits for the network.
The thread sends up to `batch_size` points per request, at least every `flush_interval` seconds. Network errors, 5xx
and 429 are retried with exponential backoff; once the server has been unreachable for `grace` seconds, batches go
to the spool file instead (and the server is probed again at backoff intervals). A batch the server refuses with a
4xx is dropped with a warning: it would never be accepted. After any successful request the spool is sent.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from time import monotonic, sleep
from typing import Any

import httpx
from tidal_cli.digits import is_digits

from tidal.config import Options, Target
from tidal.spool import Record, Spool

log = logging.getLogger("tidal")
Point = dict[str, Any]  # {"key", "value", "step", "timestamp"}

DONE, REJECTED, RETRY = "done", "rejected", "retry"
# Answers after which nothing this process sends would be taken: a finished run, and a run token whose attempt of
# the job has ended (a process left running after it was replaced, e.g. on a partitioned node).
ENDED = {(409, "run_finished"), (401, "attempt_ended")}


def error_of(response: httpx.Response) -> tuple[str, str]:
    """(code, message) of an API error answer."""
    try:
        error = response.json()["error"]
        return str(error.get("code") or ""), str(error.get("message") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return "", response.text[:200]


class Sender:
    """Sends one run's points from a daemon thread; see the module's docstring."""

    def __init__(self, target: Target, options: Options) -> None:
        self.target = target
        self.options = options
        self.spool = Spool(options.spool_path(), target.url, target.run_id)
        self.stats = {"sent": 0, "spooled": 0, "dropped": 0}
        self._lock = threading.RLock()  # reentrant: the SIGTERM handler may run while log() holds it
        self._wake = threading.Condition(self._lock)
        self._points: deque[Point] = deque()
        self._records: deque[Record] = deque()  # params and tags
        self._final: deque[Record] = deque()  # the status change, after everything else
        self._inflight: list[Record] = []
        self._flush_requested = False
        self._stopping = False
        self._closed = False
        self._abandoned = False
        self._run_finished = False  # the server said the run takes no more data
        self._down_since: float | None = None
        self._next_try = 0.0
        self._backoff = options.backoff
        self._http = httpx.Client(
            base_url=target.url + "/api/v1/", timeout=options.timeout,
            headers={"Authorization": f"Bearer {target.token}", "Accept": "application/json",
                     "User-Agent": "tidal-sdk/0.1"})
        self._thread = threading.Thread(target=self._main, name=f"tidal-sender-run{target.run_id}", daemon=True)
        self._thread.start()

    # The training thread's side: never blocks on the network.

    def add_points(self, points: list[Point]) -> None:
        """Queue points; when the queue is full, move it to the spool file (written by the caller, no network)."""
        if not points:
            return
        spill: list[Point] = []
        with self._lock:
            if self._closed or self._run_finished:
                return
            if len(self._points) + len(points) > self.options.max_queue:
                spill = [*self._points, *points]
                self._points.clear()
            else:
                self._points.extend(points)
                if len(self._points) >= self.options.batch_size:
                    self._wake.notify_all()
        if spill:
            size = self.options.batch_size
            self._spill([self._batch(spill[i:i + size]) for i in range(0, len(spill), size)])

    def add_record(self, body: dict[str, Any]) -> None:
        """Queue params or tags (`{"params": {...}}`), sent in their own request so a refused param never costs
        points."""
        with self._lock:
            if self._closed or self._run_finished:
                return
            self._records.append({"kind": "batch", "body": self._body(body)})
            self._wake.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Send what is queued now; wait until it was sent or spooled, at most `timeout` seconds. True when
        nothing is left in memory."""
        end = None if timeout is None else monotonic() + timeout
        with self._lock:
            self._flush_requested = True
            self._wake.notify_all()
            while (self._points or self._records or self._inflight) and self._thread.is_alive():
                remaining = None if end is None else end - monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._wake.wait(0.5 if remaining is None else min(remaining, 0.5))
            return not (self._points or self._records or self._inflight)

    def close(self, deadline: float, status: str | None = None) -> None:
        """Send everything (then the run's new status, for runs the user created) within `deadline` seconds;
        whatever is still unsent then goes to the spool. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = self._stopping = True
            if status and not self.target.run_token:
                self._final.append({"kind": "status", "status": status})
            self._wake.notify_all()
        self._thread.join(deadline)
        if not self._thread.is_alive():
            self._http.close()
            return
        with self._lock:  # the server hangs: keep the rest for later
            self._abandoned = True
            left = [*self._inflight, *self._records]
            left += [self._batch(list(self._points))] if self._points else []
            left += list(self._final)
            self._points.clear()
            self._records.clear()
            self._final.clear()
        self._spill(left)
        log.warning("tidal: the server did not take run %d's last data within %g s; %d requests are kept in %s "
                    "and sent at the next tidal.init() of this run", self.target.run_id, deadline, len(left),
                    self.spool.directory)

    # The thread's side.

    def _main(self) -> None:
        try:
            self._drain_spool()  # what earlier processes (or this one) left for this run
            while True:
                record = self._next()
                if record is None:
                    return
                if record.get("kind") == "status":
                    self._send_status(record)
                else:
                    self._deliver(record)
                with self._lock:
                    self._inflight = []
                    self._wake.notify_all()
        except Exception:  # never let a bug kill the training process's output silently
            log.exception("tidal: the sender of run %d stopped", self.target.run_id)

    def _next(self) -> Record | None:
        """The next request to make, waiting up to flush_interval for points; None when closing and empty."""
        with self._lock:
            while True:
                until = monotonic() + self.options.flush_interval
                while not (self._stopping or self._flush_requested or self._records
                           or len(self._points) >= self.options.batch_size):
                    remaining = until - monotonic()
                    if remaining <= 0:
                        break
                    self._wake.wait(remaining)
                if self._abandoned:
                    return None
                if self._records:
                    record = self._records.popleft()
                elif self._points:
                    take = min(len(self._points), self.options.batch_size)
                    record = self._batch([self._points.popleft() for _ in range(take)])
                elif self._stopping and self._final:
                    record = self._final.popleft()
                else:
                    self._flush_requested = False
                    self._wake.notify_all()
                    if self._stopping:
                        return None
                    continue
                self._inflight = [record]
                return record

    def _body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "attempt": self.target.attempt} if self.target.attempt else body

    def _batch(self, points: list[Point]) -> Record:
        return {"kind": "batch", "body": self._body({"metrics": points})}

    def _spill(self, records: list[Record]) -> None:
        if records and self.spool.append(records):
            self.stats["spooled"] += sum(len(r.get("body", {}).get("metrics") or []) for r in records)

    def _down_past_grace(self) -> bool:
        return self._down_since is not None and monotonic() - self._down_since >= self.options.grace

    def _mark_up(self) -> None:
        self._down_since, self._next_try, self._backoff = None, 0.0, self.options.backoff

    def _mark_down(self, retry_after: float | None = None) -> None:
        now = monotonic()
        if self._down_since is None:
            self._down_since = now
            log.warning("tidal: cannot reach %s; retrying (logging goes on)", self.target.url)
        delay = max(self._backoff, min(retry_after or 0.0, self.options.max_backoff))
        self._next_try = now + delay
        self._backoff = min(self._backoff * 2, self.options.max_backoff)

    def _deliver(self, record: Record) -> None:
        """Send a request: retried while the server is briefly away, spooled once it is away for longer."""
        while not self._abandoned:
            if self._run_finished:
                self.stats["dropped"] += len(record["body"].get("metrics") or [])
                return
            if self._down_past_grace() and monotonic() < self._next_try:
                self._spill([record])  # not yet time to probe the server again
                return
            outcome = self._send(record)
            if outcome == DONE:
                self._mark_up()
                if self.spool.pending():
                    self._drain_spool()
                return
            if outcome == REJECTED:
                return
            if self._down_past_grace():
                self._spill([record])
                return
            # While closing too: close() spools whatever is left when its deadline passes.
            assert self._down_since is not None
            sleep(max(min(self._next_try, self._down_since + self.options.grace) - monotonic(), 0.0))

    def _send_status(self, record: Record) -> None:
        """The run's new status goes after every point: when some are still spooled, it is spooled after them."""
        if self.spool.pending():
            self._drain_spool()
        if self.spool.pending():
            self._spill([record])
        else:
            self._deliver(record)

    def _send(self, record: Record) -> str:
        """One request: DONE, REJECTED (a 4xx: dropped with a warning) or RETRY (network, 5xx, 429)."""
        run = self.target.run_id
        points = len(record.get("body", {}).get("metrics") or [])
        try:
            if record.get("kind") == "status":
                response = self._http.patch(f"runs/{run}/", json={"status": record["status"]})
            else:
                response = self._http.post(f"runs/{run}/log-batch/", json=record["body"])
        except (httpx.HTTPError, OSError):
            self._mark_down()
            return RETRY
        status = response.status_code
        if status < 300:
            self.stats["sent"] += points
            return DONE
        if status in (408, 429) or status >= 500:
            retry_after = response.headers.get("Retry-After", "")
            self._mark_down(float(retry_after) if is_digits(retry_after) else None)
            return RETRY
        self._mark_up()  # the server answered
        code, message = error_of(response)
        self.stats["dropped"] += points
        if (status, code) in ENDED:  # the run is finished, or this process's attempt of the job has ended
            if not self._run_finished:
                log.warning("tidal: run %d takes no more data from this process (%s); nothing more is sent", run,
                            message)
            self._run_finished = True
        else:
            what = f"a batch of {points} points" if points else f"a request ({', '.join(record.get('body') or {})})"
            log.warning("tidal: the server refused %s for run %d (HTTP %d: %s); dropped, it would never be "
                        "accepted", what if record.get("kind") != "status" else "the status change", run, status,
                        message)
        return REJECTED

    def _drain_spool(self) -> None:
        """Send the spooled requests of this run, oldest first; on a network failure put the rest back."""
        claimed = self.spool.claim()
        for index, path in enumerate(claimed):
            records = self.spool.read(path)
            for position, record in enumerate(records):
                if record.get("kind") == "status" and self.target.run_token:
                    continue  # a run token cannot change the status: the job's end does
                outcome = REJECTED if self._run_finished or self._abandoned else self._send(record)
                if outcome == DONE:
                    self._mark_up()
                elif outcome == RETRY or self._abandoned:
                    # Back before what was spooled since the claim (close() may have spooled the run's status).
                    unsent = records[position:] + [r for rest in claimed[index + 1:] for r in self.spool.read(rest)]
                    self.spool.put_back(unsent)
                    for done in claimed[index:]:
                        self.spool.remove(done)
                    return
            self.spool.remove(path)
