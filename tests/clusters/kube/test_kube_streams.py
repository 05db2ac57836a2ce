"""bounded_lines: lines across chunks, and a silent stream cut at the deadline (its reader released)."""

from __future__ import annotations

import threading

from clusters.kube.streams import bounded_lines


def test_lines_are_split_across_chunks_and_the_last_partial_line_is_kept() -> None:
    stopped = []
    chunks = iter([b"ep", b"och 1\nepoch 2\n\xff", b"\nlast"])
    lines = list(bounded_lines(chunks, max_seconds=60, stop=lambda: stopped.append(True)))
    assert lines == ["epoch 1", "epoch 2", "\ufffd", "last"] and stopped == [True]


def test_a_silent_stream_ends_at_the_deadline_and_its_reader_is_released() -> None:
    released = threading.Event()
    reader_done = threading.Event()

    def silent():
        try:
            yield b"started\n"
            released.wait(30)  # a socket read that blocks until the connection is shut down
        finally:
            reader_done.set()

    lines = list(bounded_lines(silent(), max_seconds=0.2, stop=released.set))
    assert lines == ["started"]
    assert reader_done.wait(5)  # stop() unblocked the pump thread: nothing is left reading


def test_a_consumer_that_goes_away_stops_the_stream() -> None:
    released = threading.Event()

    def endless():
        while not released.is_set():
            yield b"tick\n"
            released.wait(0.01)

    stream = bounded_lines(endless(), max_seconds=60, stop=released.set)
    assert next(stream) == "tick"
    stream.close()  # the HTTP client disconnected: Django closes the response's iterator
    assert released.is_set()
