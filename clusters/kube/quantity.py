"""Kubernetes resource quantities ("500m", "16Gi", "2") checked and parsed without the client library."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(r"([+-]?[0-9.]+)([eE][+-]?[0-9]+|[KMGTPE]i|[mkMGTPE]|)")
_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


def is_quantity(text: str) -> bool:
    match = _QUANTITY.fullmatch(str(text))
    if not match:
        return False
    try:
        Decimal(match.group(1))
    except InvalidOperation:
        return False
    return True


def parse_quantity(text: str | int | float) -> Decimal:
    """The value of a quantity in base units (cores, bytes, devices). Raises ``ValueError``."""
    if isinstance(text, int | float):
        return Decimal(str(text))
    match = _QUANTITY.fullmatch(text.strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation as exc:
        raise ValueError(f"not a Kubernetes quantity: {text!r}") from exc
    suffix = match.group(2)
    if suffix[:1] in ("e", "E"):
        return number * (Decimal(10) ** int(suffix[1:]))
    return number * _SUFFIX[suffix]


def parse_count(text: str | int | None) -> int:
    """An integer device count (extended resources are whole numbers); missing means 0."""
    if text in (None, ""):
        return 0
    return int(parse_quantity(text))
