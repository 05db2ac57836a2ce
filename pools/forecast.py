"""The forecast source of a pool's demand, from its own history: the most serving demanded over the coming give-back
time at the same time of day on each of the past week's days (which includes the same day last week). Lending
then stops a give-back time ahead of a rise that happens every day, so serving does not wait for training to leave.

Pure: the caller reads the history (the pool's samples) and the give-back time."""

from __future__ import annotations

from collections.abc import Iterable

DAY = 86400.0
DAYS = range(1, 8)
LEAD_FLOOR = 60.0  # seconds: the least look-ahead, while the pool has no give-back times yet


def windows(now: float, lead: float) -> list[tuple[float, float]]:
    """The stretches of the past to look at: [now, now + lead] on each of the past week's days."""
    return [(now - k * DAY, now - k * DAY + lead) for k in DAYS]


def lead_time(give_back_seconds: Iterable[float]) -> float:
    """How far ahead to look: the slowest recent give-back (its p99, at least LEAD_FLOOR)."""
    ordered = sorted(give_back_seconds)
    if not ordered:
        return LEAD_FLOOR
    return max(LEAD_FLOOR, ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))])


def expected(history: Iterable[tuple[float, int]], now: float, lead: float) -> tuple[int, float] | None:
    """The most serving demanded in those stretches, and when (mapped onto today) it first reached that; None: no
    history there."""
    best: tuple[int, float] | None = None
    for at, demand in history:
        for start, end in windows(now, lead):
            if start <= at <= end:
                today = now + (at - start)
                if best is None or demand > best[0] or (demand == best[0] and today < best[1]):
                    best = (demand, today)
    return best
