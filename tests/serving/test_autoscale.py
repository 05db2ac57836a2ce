"""The HPA rules (serving/autoscale.py), table-driven: up at once (at most doubling per minute), down only after the
300 s window, clamped to [min, max], a missing metric keeps the replicas and says why."""

from __future__ import annotations

import pytest

from serving.autoscale import Policy, ScaleUp, decide, recommend

P = Policy(min_replicas=1, max_replicas=10, target_per_replica=20.0)
NOW = 10_000.0


@pytest.mark.parametrize(("total", "expected"), [
    (0.0, 1),      # metric 0: the minimum
    (20.0, 1),     # exactly one replica's target
    (20.1, 2),     # a little over: ceil
    (100.0, 5),
    (1e9, 10),     # clamped to the maximum
    (-5.0, 1),     # a negative reading is none
])
def test_recommendation_is_ceil_of_total_over_target_within_min_max(total, expected):
    assert recommend(total, P) == expected


@pytest.mark.parametrize(("current", "total", "ups", "expected", "says"), [
    (2, 80.0, (), 4, "up at once"),                                       # exactly double: allowed at once
    (2, 200.0, (), 4, "at most doubling per minute"),                     # wants 10, capped at 2 x 2
    (4, 200.0, (ScaleUp(NOW - 30, 2, 4),), 4, "at most doubling"),       # the period started at 2: no more now
    (4, 200.0, (ScaleUp(NOW - 60, 2, 4),), 8, "at most doubling"),       # exactly 60 s ago: a new period
    (4, 200.0, (ScaleUp(NOW - 61, 2, 4),), 8, "at most doubling"),
    (0, 200.0, (), 1, "at most doubling"),                                # from 0: at least one more
])
def test_scale_up_is_immediate_but_at_most_doubles_per_minute(current, total, ups, expected, says):
    decision = decide(P, current, total, NOW, scale_ups=ups)
    assert decision.replicas == expected
    assert says in decision.reason


@pytest.mark.parametrize(("age", "expected"), [
    (0.0, 8),       # a recommendation just now: kept
    (299.9, 8),     # still inside the window
    (300.0, 2),     # exactly 300 s old: out of the window (HPA's cutoff is exclusive)
    (301.0, 2),
])
def test_scale_down_waits_for_the_300_s_window(age, expected):
    decision = decide(P, 8, 40.0, NOW, recommendations=[(NOW - age, 8)])
    assert decision.replicas == expected


def test_scale_down_goes_to_the_highest_recommendation_in_the_window_not_below_the_new_one():
    recs = [(NOW - 250, 6), (NOW - 100, 4), (NOW - 400, 9)]  # 9 left the window
    decision = decide(P, 8, 20.0, NOW, recommendations=recs)
    assert decision.replicas == 6 and "down to 6" in decision.reason
    assert decision.recommendation == 1  # what the window remembers of now


def test_scale_down_to_the_minimum_after_the_window_when_the_metric_is_zero():
    assert decide(P, 5, 0.0, NOW, recommendations=[(NOW - 300, 5)]).replicas == 1


def test_a_missing_metric_keeps_the_replicas_and_says_why():
    decision = decide(P, 3, None, NOW, missing="no metric pushed yet")
    assert (decision.replicas, decision.recommendation) == (3, None)
    assert decision.reason == "no metric pushed yet: kept 3"


@pytest.mark.parametrize(("current", "expected", "says"), [
    (0, 1, "below the minimum 1"),
    (12, 10, "above the maximum 10"),
])
def test_a_missing_metric_still_clamps_to_min_and_max(current, expected, says):
    decision = decide(P, current, None, NOW)
    assert decision.replicas == expected and says in decision.reason


def test_a_raised_minimum_and_a_lowered_maximum_apply_at_once():
    raised = Policy(min_replicas=6, max_replicas=10, target_per_replica=20.0)
    assert decide(raised, 1, 0.0, NOW).replicas == 6  # no doubling limit on an order
    lowered = Policy(min_replicas=1, max_replicas=3, target_per_replica=20.0)
    assert decide(lowered, 8, 200.0, NOW, recommendations=[(NOW - 10, 8)]).replicas == 3


def test_steady_metric_keeps_the_replicas():
    decision = decide(P, 3, 50.0, NOW)
    assert decision.replicas == 3 and "3 is right" in decision.reason
