"""Whole numbers written in a request, a cursor or a label: ASCII digits only, as Django's `<int:...>` paths read
them."""

from __future__ import annotations


def is_digits(text: str) -> bool:
    """Whether `text` is a whole number in ASCII digits. `str.isdigit()` is also true of superscripts ("²"), which
    `int()` refuses (a 500 where a 4xx belongs), and of other scripts' digits, which `int()` reads as a number that
    the same request spelled in ASCII digits would not have named."""
    return text.isascii() and text.isdigit()
