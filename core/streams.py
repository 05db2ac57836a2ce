"""A management command's output as a plain text stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the pure packages (replay/) take a TextSink and must load no framework
    from django.core.management.base import OutputWrapper


class TextSink(Protocol):
    """Where text goes: a file, sys.stdout, or a command's output (RawStream)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class RawStream:
    """Writes to a command's `self.stdout` / `self.stderr` exactly what it is given: OutputWrapper.write ends every
    call with a newline unless told otherwise, and a progress bar redrawing one line with \\r, or a CSV written in
    pieces, must not get one."""

    def __init__(self, wrapper: OutputWrapper) -> None:
        self.wrapper = wrapper

    def write(self, text: str) -> int:
        self.wrapper.write(text, ending="")
        return len(text)

    def flush(self) -> None:
        self.wrapper.flush()
