"""One memo for every "known to fit / known not to fit" answer of a cycle: dominance over sizes.

An answer is remembered per context (what must be equal for two questions to be comparable: a flavor, devices per
replica, a topology, the reservations counted in, ...) and size (a tuple where every component larger makes the
question harder: replicas, CPU and memory per replica, devices, a lower priority written as its negative). Under
the monotonicity facts of docs/scheduling-invariants.md:
- a size at least as large, component by component, as one known not to fit does not fit either;
- a size at most as large as one known to fit fits too.

A memo is cleared by the state's invalidation events it follows (CycleState.capacity_grew, usage_fell,
borrowing_grew); one that follows none holds for the whole cycle (the inventory does not change within it). With
`enabled` off (the plain mode) it knows nothing and remembers nothing.
"""

from __future__ import annotations

from collections.abc import Hashable
from operator import ge, le

Size = tuple[int, ...]


class DominanceMemo:
    __slots__ = ("enabled", "_fits", "_fails")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._fits: dict[Hashable, list[Size]] = {}
        self._fails: dict[Hashable, list[Size]] = {}

    def known(self, context: Hashable, size: Size) -> bool | None:
        """True: known to fit; False: known not to fit; None: not known (ask, then `record`)."""
        if not self.enabled:
            return None
        for failed in self._fails.get(context, ()):
            if all(map(ge, size, failed)):
                return False
        for fitted in self._fits.get(context, ()):
            if all(map(le, size, fitted)):
                return True
        return None

    def known_to_fail(self, context: Hashable, size: Size) -> bool:
        """Is a size at most as large as this one known not to fit? (A memo that records only failures.)"""
        if self.enabled:
            for failed in self._fails.get(context, ()):
                if all(map(ge, size, failed)):
                    return True
        return False

    def record(self, context: Hashable, size: Size, fits: bool) -> None:
        if self.enabled:
            (self._fits if fits else self._fails).setdefault(context, []).append(size)

    def forget(self) -> None:
        """An invalidation event this memo follows: what it knew may have changed."""
        self._fits.clear()
        self._fails.clear()
