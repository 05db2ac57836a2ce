"""Long-lived byte streams (a followed pod log, a watch round) that must end on time. Pure Python.

A followed log can stay silent for hours, so a deadline checked between lines would never fire: a pump thread
reads the chunks, the generator waits on a queue with the time left, and on the deadline (or when the consumer
goes away) calls ``stop`` so the reader blocked in the socket is released and the thread ends.

A followed log read with timestamps can be resumed where it stopped (:class:`LogPosition`): from the second of the
last line given, skipping the lines of that second already given, so nothing is given twice or lost.

A watch round blocks in a socket read until the server's timeout; :class:`Interrupt` lets another thread (a
process shutting down) cut it at once.
"""

from __future__ import annotations

import queue
import re
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from core.digits import is_digits

from .ratelimit import Clock

_END = object()


class BoundedLines:
    """Decoded lines of ``chunks`` until the stream ends or ``max_seconds`` pass; ``stop`` is always called (at the
    end, the deadline, or ``close()``: the consumer went away). Once exhausted, ``paused`` says why it stopped
    before the stream ended ("" when it did end)."""

    def __init__(self, chunks: Iterator[bytes], *, max_seconds: float, stop: Callable[[], None],
                 clock: Clock = time.monotonic) -> None:
        self.paused = ""
        self._lines = self._read(chunks, max_seconds, stop, clock)

    def __iter__(self) -> BoundedLines:
        return self

    def __next__(self) -> str:
        return next(self._lines)

    def close(self) -> None:
        self._lines.close()

    def _read(self, chunks: Iterator[bytes], max_seconds: float, stop: Callable[[], None],
              clock: Clock) -> Generator[str, None, None]:
        pipe: queue.Queue = queue.Queue()

        def pump() -> None:
            try:
                for chunk in chunks:
                    pipe.put(chunk)
            except Exception as exc:  # stopped by us (nobody reads any more), or the connection dropped
                pipe.put(exc)
            finally:
                pipe.put(_END)

        threading.Thread(target=pump, name="log-follow", daemon=True).start()
        deadline = clock() + max_seconds
        buffer = b""
        try:
            while True:
                try:
                    item = pipe.get(timeout=max(deadline - clock(), 0))
                except queue.Empty:
                    self.paused = f"after {max_seconds:.0f} s"
                    return
                if item is _END:
                    break
                if isinstance(item, Exception):  # what was read before the break is all there is
                    self.paused = f"the connection broke ({type(item).__name__})"
                    return
                *lines, buffer = (buffer + item).split(b"\n")
                for line in lines:
                    yield line.decode("utf-8", errors="replace")
            if buffer:
                yield buffer.decode("utf-8", errors="replace")
        finally:
            stop()


# ------------------------------------------------------------------------------------- resuming a followed log

_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")
NANOS = 10**9


def stamp_nanos(text: str) -> int | None:
    """Nanoseconds since the epoch of a log line's RFC 3339 timestamp (what `timestamps=true` puts before each line,
    e.g. ``2026-05-01T10:00:00.123456789Z``); None when it is not one."""
    match = _STAMP.match(text)
    if match is None:
        return None
    offset = "+00:00" if match[3] == "Z" else match[3]
    seconds = int(datetime.fromisoformat(match[1] + offset).timestamp())
    return seconds * NANOS + int((match[2] or "").ljust(9, "0"))


@dataclass
class LogPosition:
    """Where a followed log stands: the timestamp of the last line given (None: no line yet, resume from the log's
    start) and how many lines given carried exactly that timestamp (a burst of lines can share one)."""

    stamp: int | None = None
    same: int = 0

    def __str__(self) -> str:
        return "" if self.stamp is None else f"{self.stamp}.{self.same}"

    @classmethod
    def parse(cls, text: str) -> LogPosition:
        """The position `str()` gave; ValueError for anything else."""
        if text == "":
            return cls()
        stamp, _, same = text.partition(".")
        if not is_digits(stamp) or not is_digits(same):
            raise ValueError(f"not a log position: {text!r}")
        position = cls(int(stamp), int(same))
        try:
            position.since_time()
        except (OverflowError, OSError, ValueError) as exc:  # a time no clock reaches
            raise ValueError(f"not a log position: {text!r}") from exc
        return position

    def since_time(self) -> str | None:
        """The `sinceTime` a resumed follow asks (whole seconds, so it repeats the lines of that second, which are
        skipped): None to read from the log's start."""
        if self.stamp is None:
            return None
        return datetime.fromtimestamp(self.stamp // NANOS, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def covers(self, stamp: int, repeated: int) -> bool:
        """Whether the line with `stamp`, the `repeated`-th so far with that very stamp, was given already."""
        return self.stamp is not None and (stamp < self.stamp or (stamp == self.stamp and repeated <= self.same))

    def advance(self, stamp: int) -> None:
        """Past a line given with `stamp` (a line stamped before the position, the clock having moved back, leaves
        it: resuming skips such lines, and this one was given)."""
        if self.stamp is not None and stamp < self.stamp:
            return
        if stamp == self.stamp:
            self.same += 1
        else:
            self.stamp, self.same = stamp, 1


class TimestampedLines:
    """The lines of a log read with `timestamps=true`, without their timestamps: those `after` covers skipped (a
    follow resumed from `after.since_time()` repeats them), the position moved past each line given. A line without
    a timestamp is given as it is. `paused` is the source's."""

    def __init__(self, source: BoundedLines, after: LogPosition | None = None) -> None:
        self._source = source
        self._after = after or LogPosition()
        self._position = LogPosition(self._after.stamp, self._after.same)
        self._lines = self._read()

    @property
    def position(self) -> str:
        return str(self._position)

    @property
    def paused(self) -> str:
        return self._source.paused

    def __iter__(self) -> TimestampedLines:
        return self

    def __next__(self) -> str:
        return next(self._lines)

    def close(self) -> None:
        self._lines.close()
        self._source.close()

    def _read(self) -> Generator[str, None, None]:
        seen: dict[int, int] = {}  # stamp -> lines read with it, for the stamp `after` ends on
        for line in self._source:
            stamp_text, _, text = line.partition(" ")
            stamp = stamp_nanos(stamp_text)
            if stamp is None:
                yield line
                continue
            if stamp == self._after.stamp:
                seen[stamp] = seen.get(stamp, 0) + 1
            if self._after.covers(stamp, seen.get(stamp, 0)):
                continue
            self._position.advance(stamp)
            yield text


class Interrupt:
    """Ends, from any thread, the blocking reads of streams attached to it: the one under way, and any attached later.

    The reading thread holds ``attached(cut)`` around its reads, where ``cut`` shuts down its connection (which makes
    a blocked read return). ``set()`` calls the attached ``cut`` under the lock that detaching takes too, so a
    connection is never cut after its reader has given it back to a pool.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._cut: Callable[[], None] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        with self._lock:
            self._set = True
            if self._cut is not None:
                self._cut()
                self._cut = None

    @contextmanager
    def attached(self, cut: Callable[[], None]) -> Iterator[None]:
        """Reads inside this block end when ``set()`` is called; already set, the connection is cut at once."""
        with self._lock:
            if self._set:
                cut()
            else:
                self._cut = cut
        try:
            yield
        finally:
            with self._lock:
                if self._cut is cut:
                    self._cut = None
