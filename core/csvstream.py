"""Every CSV the server writes goes through here, so no cell a user typed opens as a formula in a spreadsheet.

A cell beginning with `=`, `+`, `-`, `@`, a tab or a carriage return is read as a formula by Excel, LibreOffice and
Google Sheets (`=HYPERLINK(...)`, `+cmd|' /C calc'!A0`, `@SUM(...)`); such a cell is written with a leading `'`,
which spreadsheets show as text. A number stays as it is, whether it is given as a number or as its text ("-1.5",
"-Infinity"): a negative value is data, not a formula.

`line_writer().writerow(row)` returns the line instead of writing it, so a generator can yield it to a
StreamingHttpResponse; `writer(file)` writes to a file or an HttpResponse.

The CLI, which cannot import the server, keeps the same rule in `tidal_cli.csvcells`; the same tests run both."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE)


def safe_cell(value: Any) -> Any:
    """`value` as a spreadsheet will not run it: text that would be read as a formula gets a leading `'`."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not NUMBER.fullmatch(value):
        return "'" + value
    return value


class SafeWriter:
    """A csv writer whose rows go through `safe_cell`."""

    def __init__(self, destination: Any) -> None:
        self._writer = csv.writer(destination)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([safe_cell(value) for value in row])


class _Echo:
    def write(self, value: str) -> str:
        return value


def line_writer() -> SafeWriter:
    return SafeWriter(_Echo())


def writer(destination: Any) -> SafeWriter:
    return SafeWriter(destination)
