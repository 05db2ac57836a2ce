"""Long-lived byte streams (a followed pod log, a watch round) that must end on time. Pure Python.

A followed log can stay silent for hours, so a deadline checked between lines would never fire: a pump thread
reads the chunks, the generator waits on a queue with the time left, and on the deadline (or when the consumer
goes away) calls ``stop`` so the reader blocked in the socket is released and the thread ends.

A watch round blocks in a socket read until the server's timeout; :class:`Interrupt` lets another thread (a
process shutting down) cut it at once.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .ratelimit import Clock

_END = object()


def bounded_lines(chunks: Iterator[bytes], *, max_seconds: float, stop: Callable[[], None],
                  clock: Clock = time.monotonic) -> Iterator[str]:
    """Decoded lines of ``chunks`` until the stream ends or ``max_seconds`` pass; ``stop`` is always called."""
    pipe: queue.Queue = queue.Queue()

    def pump() -> None:
        try:
            for chunk in chunks:
                pipe.put(chunk)
        except Exception:  # noqa: S110  (stopped by us, or the connection dropped: either way the stream is over)
            pass
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
                return
            if item is _END:
                break
            *lines, buffer = (buffer + item).split(b"\n")
            for line in lines:
                yield line.decode("utf-8", errors="replace")
        if buffer:
            yield buffer.decode("utf-8", errors="replace")
    finally:
        stop()


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
