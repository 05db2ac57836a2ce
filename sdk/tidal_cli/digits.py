"""Whole numbers read from the command line, the environment and response headers (by the CLI and the `tidal` SDK,
which imports it from here): ASCII digits only, as the server reads them (its `core.digits`)."""

from __future__ import annotations


def is_digits(text: str) -> bool:
    """Whether `text` is a whole number in ASCII digits. `str.isdigit()` is also true of superscripts ("²"), which
    `int()` refuses, and of other scripts' digits, which `int()` reads as a number."""
    return text.isascii() and text.isdigit()
