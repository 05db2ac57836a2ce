"""Every CSV the CLI prints goes through here, so no cell opens as a formula in a spreadsheet: the server's own rule
(`core.csvstream` on the server, which the CLI cannot import), kept here too because the CLI may talk to a server
that predates it. A cell beginning with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'`; a number,
given as a number or as its text ("-1.5", "-Infinity"), stays as it is. The same tests run both."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE)


def safe_cell(value: Any) -> Any:
    """`value` as a spreadsheet will not run it: text that would be read as a formula gets a leading `'`."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not NUMBER.fullmatch(value):
        return "'" + value
    return value


def write_csv(lines: Iterable[str], out: TextIO) -> None:
    """Write the CSV read from `lines` (a server's streamed CSV) to `out`, row by row, every cell made safe."""
    writer = csv.writer(out, lineterminator="\n")
    for row in csv.reader(_with_newlines(lines)):
        writer.writerow([safe_cell(value) for value in row])


def _with_newlines(lines: Iterable[str]) -> Iterator[str]:
    # Lines arrive without their ends; the reader needs them to keep a newline inside a quoted cell.
    for line in lines:
        yield line + "\n"
