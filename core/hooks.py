"""Named hooks: how an app lower in the layering (core <- tenancy <- quotas <- jobs <- ...) uses what apps above it
provide without importing them.

The lower app declares a `Hook` (the state machine's `jobs.lifecycle.on_change`, the dispatch port
`jobs.ports.clusters`); apps above connect to it in their `AppConfig.ready()`, explicitly, never as the side effect
of an import. Every hook is named and listed (`manage.py hooks`), and a required one that nothing connected to fails
the system check (`core.checks`) before anything runs.

Receivers are kept in the order they connected (the order of INSTALLED_APPS), and connecting one again changes
nothing, so a repeated `ready()` adds no second call. A `single` hook holds one receiver: the last connected.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")

_declared: dict[str, Hook[Any]] = {}
_FUNCTION_REPR = re.compile(r"<function (\S+) at 0x[0-9a-f]+>")


class Hook(Generic[T]):
    """A named, ordered set of receivers of type T (functions, classes, or values such as a project page panel)."""

    def __init__(self, name: str, *, single: bool = False, required: bool = False) -> None:
        if name in _declared:
            raise ValueError(f"the hook {name!r} is declared twice")
        self.name = name
        self.single = single
        self.required = required  # the system check fails while nothing is connected
        self._receivers: tuple[T, ...] = ()
        _declared[name] = self

    def connect(self, receiver: T) -> T:
        """Add `receiver` after those connected before (a single hook: instead of them); returns it."""
        if self.single:
            self._receivers = (receiver,)
        elif receiver not in self._receivers:
            self._receivers = (*self._receivers, receiver)
        return receiver

    def disconnect(self, receiver: T) -> None:
        self._receivers = tuple(r for r in self._receivers if r != receiver)

    @property
    def receivers(self) -> tuple[T, ...]:
        return self._receivers

    def __iter__(self) -> Iterator[T]:
        return iter(self._receivers)

    def one(self) -> T:
        """The receiver of a single hook; LookupError, naming the hook, while nothing is connected."""
        if not self._receivers:
            raise LookupError(f"nothing is connected to the hook {self.name!r}")
        return self._receivers[0]

    def send(self: Hook[Callable[P, R]], *args: P.args, **kwargs: P.kwargs) -> list[R]:
        """Call every receiver in order with these arguments; their answers, in the same order."""
        return [receiver(*args, **kwargs) for receiver in self._receivers]

    @contextmanager
    def replaced(self, receivers: Iterable[T]) -> Iterator[None]:
        """Only `receivers` inside the block, then those connected before it again (tests, benchmarks)."""
        saved, self._receivers = self._receivers, tuple(receivers)
        try:
            yield
        finally:
            self._receivers = saved

    def __repr__(self) -> str:
        return f"<Hook {self.name}: {len(self._receivers)} connected>"


def declared() -> list[Hook[Any]]:
    """Every hook declared so far (by the modules imported), by name."""
    return [_declared[name] for name in sorted(_declared)]


def describe(receiver: object) -> str:
    """A receiver as `manage.py hooks` lists it: module.qualname for functions and classes, else its repr with the
    functions in it by name."""
    qualname = getattr(receiver, "__qualname__", None)
    module = getattr(receiver, "__module__", None)
    if qualname and module and callable(receiver):
        return f"{module}.{qualname}"
    return _FUNCTION_REPR.sub(r"\1", repr(receiver))
