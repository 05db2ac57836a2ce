"""Per-process copies of slowly changing tables for the submission path, read again after a few seconds.

Validating a submission against a copy read a moment ago is the same as having submitted a moment earlier: the
scheduler, which always reads fresh data, explains or handles whatever changed since. What a copy lacks (a flavor or
a quota created a moment ago) is confirmed by reading again before anything is rejected, so callers never turn a
request away on old data.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from core.hooks import Hook

T = TypeVar("T")

TTL_SECONDS = 2.0


class Forgettable(Protocol):
    def forget(self) -> None: ...


# Every per-process copy, which forget_all() drops: each connects itself when it is made.
forgettable: Hook[Forgettable] = Hook("core.snapshots.forgettable")


class Snapshot(Generic[T]):
    def __init__(self, load: Callable[[], T], ttl: float = TTL_SECONDS) -> None:
        self._load = load
        self._ttl = ttl
        self._value: tuple[float, T] | None = None
        forgettable.connect(self)

    def get(self, *, fresh: bool = False) -> T:
        """The copy, read again when `fresh` or older than the TTL."""
        now = time.monotonic()
        current = self._value
        if fresh or current is None or now - current[0] > self._ttl:
            current = self._value = (now, self._load())
        return current[1]

    def forget(self) -> None:
        self._value = None


def forget_all() -> None:
    """Drop every copy (tests that rebuild inventories and catalogs between requests)."""
    for snapshot in forgettable:
        snapshot.forget()


K = TypeVar("K")


class KeyedSnapshot(Generic[K, T]):
    """A Snapshot per key (e.g. one project's settings), each read again when older than the TTL."""

    def __init__(self, load: Callable[[K], T], ttl: float = TTL_SECONDS) -> None:
        self._load = load
        self._ttl = ttl
        self._values: dict[K, tuple[float, T]] = {}
        forgettable.connect(self)

    def get(self, key: K) -> T:
        now = time.monotonic()
        current = self._values.get(key)
        if current is None or now - current[0] > self._ttl:
            current = self._values[key] = (now, self._load(key))
        return current[1]

    def forget(self, key: K | None = None) -> None:
        """Drop one key's copy, or every key's."""
        if key is None:
            self._values.clear()
        else:
            self._values.pop(key, None)
