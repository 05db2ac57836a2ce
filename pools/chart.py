"""The Pools page's 24 h chart as SVG polylines drawn on the server: no script, so nothing for the page's Content
Security Policy to allow. `draw` is the generic part (the service page draws its replicas and load with it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


Series = tuple[str, str, str, Callable[[Any], float]]  # key, label, colour, the value of a sample


def draw(samples: Sequence[Any], end: datetime, series: Sequence[Series], top: float,
         at: Callable[[Any], datetime], span: timedelta = timedelta(hours=24)) -> list[Line]:
    """One polyline per series over the last `span` before `end`; y from 0 to `top`."""
    if not samples:
        return []
    top = max(top, 1)
    start = end - span

    def x(moment: datetime) -> float:
        return round(WIDTH * max(0.0, (moment - start) / span), 1)

    def y(value: float) -> float:
        return round(HEIGHT * (1 - min(value, top) / top), 1)

    return [Line(key, label, colour, " ".join(f"{x(at(s))},{y(value(s))}" for s in samples))
            for key, label, colour, value in series]


def lines(samples: Sequence[dict[str, Any]], end: datetime, span: timedelta = timedelta(hours=24)) -> list[Line]:
    """The pool's demand, demand + headroom, lent and used; y up to the pool's largest capacity."""
    values: dict[str, Callable[[Any], float]] = {
        "demand": lambda s: s["demand"], "reserved": lambda s: s["demand"] + s["headroom"],
        "lent": lambda s: s["lent"], "used": lambda s: s["used"]}
    return draw(samples, end, [(key, label, colour, values[key]) for key, label, colour in SERIES], top_of(samples),
                lambda s: s["at"], span)


GIVEN_BACK = "#cf222e"


def given_back_path(given_back: Sequence[dict[str, Any]], samples: Sequence[dict[str, Any]], end: datetime,
                    span: timedelta = timedelta(hours=24)) -> str:
    """An SVG path of one upright tick per give-back, where it began, as tall as the devices it took back (on the
    lines' scale); "" when there was none in the span."""
    top, start = top_of(samples), end - span
    ticks = []
    for g in given_back:
        x = round(WIDTH * max(0.0, (g["at"] - start) / span), 1)
        ticks.append(f"M{x},{HEIGHT} V{round(HEIGHT * (1 - min(g['devices'], top) / top), 1)}")
    return " ".join(ticks)


def top_of(samples: Sequence[dict[str, Any]]) -> float:
    return max(max((s["capacity"] for s in samples), default=1), 1)
