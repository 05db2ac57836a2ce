"""Lines of a live byte stream (a followed pod log) with a bound on its total duration. Pure Python.

A followed log can stay silent for hours, so a deadline checked between lines would never fire: a pump thread
reads the chunks, the generator waits on a queue with the time left, and on the deadline (or when the consumer
goes away) calls ``stop`` so the reader blocked in the socket is released and the thread ends.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

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
        except Exception:  # stopped by us, or the connection dropped: either way the stream is over
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
