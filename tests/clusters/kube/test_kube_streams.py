"""BoundedLines: lines across chunks, a silent stream cut at the deadline (its reader released) and saying so;
TimestampedLines: a followed log resumed from its position gives every line once."""

from __future__ import annotations

import threading

import pytest

from clusters.kube.streams import BoundedLines, LogPosition, TimestampedLines, stamp_nanos


def test_lines_are_split_across_chunks_and_the_last_partial_line_is_kept() -> None:
    stopped = []
    chunks = iter([b"ep", b"och 1\nepoch 2\n\xff", b"\nlast"])
    stream = BoundedLines(chunks, max_seconds=60, stop=lambda: stopped.append(True))
    assert list(stream) == ["epoch 1", "epoch 2", "\ufffd", "last"] and stopped == [True]
    assert stream.paused == ""  # the stream ended


def test_a_silent_stream_ends_at_the_deadline_and_its_reader_is_released() -> None:
    released = threading.Event()
    reader_done = threading.Event()

    def silent():
        try:
            yield b"started\n"
            released.wait(30)  # a socket read that blocks until the connection is shut down
        finally:
            reader_done.set()

    stream = BoundedLines(silent(), max_seconds=0.2, stop=released.set)
    assert list(stream) == ["started"] and stream.paused == "after 0 s"
    assert reader_done.wait(5)  # stop() unblocked the pump thread: nothing is left reading


def test_a_consumer_that_goes_away_stops_the_stream() -> None:
    released = threading.Event()

    def endless():
        while not released.is_set():
            yield b"tick\n"
            released.wait(0.01)

    stream = BoundedLines(endless(), max_seconds=60, stop=released.set)
    assert next(stream) == "tick"
    stream.close()  # the HTTP client disconnected: Django closes the response's iterator
    assert released.is_set()


def test_a_broken_connection_pauses_the_stream_with_what_was_read() -> None:
    def breaking():
        yield b"epoch 1\nepo"
        raise ConnectionResetError("peer gone")

    stream = BoundedLines(breaking(), max_seconds=60, stop=lambda: None)
    assert list(stream) == ["epoch 1"] and stream.paused == "the connection broke (ConnectionResetError)"


def stamped(*lines: tuple[str, str]) -> BoundedLines:
    body = "".join(f"{stamp} {text}\n" for stamp, text in lines).encode()
    return BoundedLines(iter([body]), max_seconds=60, stop=lambda: None)


LOG = [("2026-05-01T10:00:00.5Z", "a"), ("2026-05-01T10:00:01Z", "b"), ("2026-05-01T10:00:01Z", "c"),
       ("2026-05-01T10:00:01.000000001Z", "d"), ("2026-05-01T12:00:02+02:00", "e")]


@pytest.mark.parametrize("cut", range(len(LOG) + 1))
def test_a_log_resumed_where_it_stopped_gives_every_line_once(cut: int) -> None:
    """The first follow stops after `cut` lines; the API server answers the resumed one from the second of the last
    line given (`sinceTime`), so with that second's lines again: they are skipped, lines sharing a timestamp
    included."""
    first = TimestampedLines(stamped(*LOG[:cut]))
    given = list(first)
    after = LogPosition.parse(first.position)
    since = after.since_time()
    again = [line for line in LOG if since is None or stamp_nanos(line[0]) // 10**9 >= stamp_nanos(since) // 10**9]
    resumed = TimestampedLines(stamped(*again), after)
    assert given + list(resumed) == ["a", "b", "c", "d", "e"]
    assert LogPosition.parse(resumed.position) == LogPosition(stamp_nanos("2026-05-01T10:00:02Z"), 1)


def test_positions_and_timestamps() -> None:
    assert stamp_nanos("2026-05-01T10:00:00.1Z") == stamp_nanos("2026-05-01T12:00:00.100000000+02:00")
    assert stamp_nanos("not a time") is None and stamp_nanos("2026-05-01T10:00:00.1234567891Z") is None
    assert LogPosition.parse("") == LogPosition() and LogPosition().since_time() is None
    position = LogPosition.parse(f"{stamp_nanos('2026-05-01T10:00:01.9Z')}.2")
    assert position.since_time() == "2026-05-01T10:00:01Z" and str(position) == f"{position.stamp}.2"
    for bad in ("x", "1.", ".1", "1.2.3", "-1.0", "9" * 40 + ".1", "9" * 22 + ".1"):
        with pytest.raises(ValueError):
            LogPosition.parse(bad)


def test_a_line_without_a_timestamp_is_given_as_it_is() -> None:
    stream = TimestampedLines(BoundedLines(iter([b"unstamped line\n"]), max_seconds=60, stop=lambda: None))
    assert list(stream) == ["unstamped line"] and stream.position == ""
