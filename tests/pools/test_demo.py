"""The demo's pool: a synthetic day (low at night, a daytime peak) and the pool seeded once with its borrower (the
demo service that follows the day and drives the pool: tests/serving/test_demo.py)."""

from __future__ import annotations

from pools import demo


def test_the_synthetic_day_is_low_at_night_and_peaks_in_the_afternoon():
    night, peak = demo.demand_share(3.0), demo.demand_share(15.0)
    assert night < 0.2 < 0.85 < peak
    assert all(0.0 <= demo.demand_share(h / 4) <= 1.0 for h in range(96))
    assert demo.demo_hour(demo.DAY_SECONDS * 10 + demo.DAY_SECONDS / 2) == 12.0  # time compressed: a day a cycle
