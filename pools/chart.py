"""The Pools page's 24 h chart as SVG polylines drawn on the server: no script, so nothing for the page's Content
Security Policy to allow."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

WIDTH, HEIGHT = 720, 180
SERIES = (("demand", "Demand", "#1f6feb"), ("reserved", "Demand + headroom", "#9a6700"),
          ("lent", "Lent", "#2da44e"), ("used", "Used by training", "#8250df"))


@dataclass(frozen=True)
class Line:
    key: str
    label: str
    colour: str
    points: str  # "x,y x,y ..."


def lines(samples: Sequence[dict[str, Any]], end: datetime, span: timedelta = timedelta(hours=24)) -> list[Line]:
    """One polyline per series over the last `span` before `end`; y from 0 to the pool's largest capacity."""
    if not samples:
        return []
    top = max(max(s["capacity"] for s in samples), 1)
    start = end - span

    def x(at: datetime) -> float:
        return round(WIDTH * max(0.0, (at - start) / span), 1)

    def y(value: int) -> float:
        return round(HEIGHT * (1 - value / top), 1)

    values = {"demand": lambda s: s["demand"], "reserved": lambda s: s["demand"] + s["headroom"],
              "lent": lambda s: s["lent"], "used": lambda s: s["used"]}
    return [Line(key, label, colour, " ".join(f"{x(s['at'])},{y(values[key](s))}" for s in samples))
            for key, label, colour in SERIES]
