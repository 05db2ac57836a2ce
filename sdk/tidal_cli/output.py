"""Readable tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

# A column: (key, header) or (key, header, formatter of the row's value).
Column = tuple[str, str] | tuple[str, str, Callable[[Any], str]]


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _cell(row: dict, column: Column) -> str:
    value = row.get(column[0])
    if len(column) == 3:
        return column[2](value)
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def table(rows: Sequence[dict], columns: Sequence[Column], empty: str = "(none)") -> str:
    """Columns are (key, header[, formatter]); None shows as '-'. The last column is never padded."""
    if not rows:
        return empty
    cells = [[_cell(row, column).replace("\n", " ") for column in columns] for row in rows]
    headers = [column[1] for column in columns]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)).rstrip() for cell in cells]
    return "\n".join(lines)


def fields(pairs: Sequence[tuple[str, Any]], indent: str = "  ") -> str:
    """`label: value` lines with aligned values, skipping empty ones."""
    shown = [(label, str(value)) for label, value in pairs if value not in (None, "", [], {})]
    width = max((len(label) for label, _ in shown), default=0)
    return "\n".join(f"{indent}{(label + ':').ljust(width + 1)} {value}" for label, value in shown)


def truncate(text: str | None, width: int) -> str:
    text = (text or "").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"
