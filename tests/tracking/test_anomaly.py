"""The anomaly rules on synthetic curves (pure functions): each injected anomaly is found at its step, clean noisy
curves raise nothing, and the rolling state carries across batches of any size."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracking.series import anomaly
from tracking.series.anomaly import Cleared, Finding, _row_medians

DEFAULT_RULES = anomaly.active_rules([])  # what a project without settings runs: the plateau is opt-in


def loss_curve(seed: int, n: int = 1500, every: int = 10) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    return [(i * every, (2.0 + 8.0 * math.exp(-i / 300)) * (1 + rng.gauss(0, 0.02))) for i in range(n)]


def level_curve(seed: int, level: float, sd: float, n: int = 500) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    return [(i, level + rng.gauss(0, sd)) for i in range(n)]


def run_batches(key: str, points: list[tuple[int, float]], rules=None, batch: int = 37) -> list:
    """Feed `points` in batches, carrying the state as ingestion does; all events in order."""
    state: dict = {}
    events: list = []
    for i in range(0, len(points), batch):
        found, state = anomaly.evaluate_batch(state, [(key, s, v) for s, v in points[i:i + batch]],
                                              rules or DEFAULT_RULES, attempt=1)
        events += found
    return events


def opened(events) -> list[tuple[str, int]]:
    return [(e.rule, e.step) for e in events if isinstance(e, Finding)]


@pytest.mark.parametrize("seed", range(5))
def test_clean_noisy_curves_raise_nothing(seed):
    assert run_batches("train/loss", loss_curve(seed)) == []
    assert run_batches("train/grad_norm", [(s, abs(v)) for s, v in level_curve(seed, 1.0, 0.15)]) == []
    assert run_batches("train/tokens_per_s", level_curve(seed, 50_000, 2_000)) == []
    assert run_batches("system/gpu0_util", [(s, min(100.0, v)) for s, v in level_curve(seed, 92, 4)]) == []


@given(seed=st.integers(0, 2**32 - 1), batch=st.integers(1, 200))
@settings(max_examples=30, deadline=None)
def test_no_alert_on_a_clean_loss_curve_whatever_the_batching(seed, batch):
    assert run_batches("train/loss", loss_curve(seed, n=400), batch=batch) == []


def test_non_finite_opens_at_the_first_nan_and_clears_on_a_finite_value():
    points = [(s, 1.0) for s in range(10)] + [(10, math.nan), (11, math.nan), (12, math.inf), (13, 1.0)]
    events = run_batches("acc", points, batch=3)
    assert events == [Finding("non_finite", "acc", 10, events[0].value, "acc is NaN at step 10"),
                      Cleared("non_finite", "acc", 13)]


@pytest.mark.parametrize("at", [400, 900])
def test_a_loss_spike_is_found_at_its_step(at):
    points = loss_curve(1)
    points[at // 10] = (at, points[at // 10][1] * 1.8)
    events = run_batches("train/loss", points)
    assert opened(events) == [("loss_spike", at)]
    assert Cleared("loss_spike", "train/loss", at + 10) in events  # the next point is normal again


def test_a_spike_needs_a_window_first_and_respects_the_threshold():
    points = loss_curve(2, n=200)
    points[5] = (50, 100.0)  # within the first min_points: no baseline yet
    assert opened(run_batches("train/loss", points)) == []
    points = loss_curve(2, n=1200)
    points[1100] = (11000, points[1100][1] * 1.3)
    assert opened(run_batches("train/loss", points)) == [("loss_spike", 11000)]
    lenient = {**DEFAULT_RULES, "loss_spike": {**DEFAULT_RULES["loss_spike"], "z": 50.0}}
    assert opened(run_batches("train/loss", points, rules=lenient)) == []


def test_a_plateau_opens_after_the_window_without_improvement_and_clears_on_improvement():
    rng = random.Random(3)
    points = [(s, 5.0 - s / 1000 + rng.gauss(0, 0.001)) for s in range(0, 2000, 10)]  # improving
    points += [(s, 3.0 + abs(rng.gauss(0, 0.005))) for s in range(2000, 4000, 10)]  # flat
    points += [(4000, 2.0)]
    rules = {"loss_plateau": {"steps": 1000, "min_delta": 0.01}}
    events = run_batches("eval/loss", points, rules=rules)
    assert [e.rule for e in events] == ["loss_plateau", "loss_plateau"]
    # the best is the last value more than 1% below the previous best: on the plateau's first points
    assert isinstance(events[0], Finding) and 2990 <= events[0].step <= 3100
    assert "for 1000 steps" in events[0].message
    assert events[1] == Cleared("loss_plateau", "eval/loss", 4000)


def test_plateau_is_off_unless_enabled():
    assert "loss_plateau" not in anomaly.active_rules([])
    assert anomaly.active_rules([("loss_plateau", True, {"steps": 50})])["loss_plateau"]["steps"] == 50
    assert "non_finite" not in anomaly.active_rules([("non_finite", False, {})])


def test_grad_norm_explosion_by_factor_and_by_nan():
    points = [(s, abs(v)) for s, v in level_curve(4, 1.0, 0.1, n=100)]
    points[60] = (60, 15.0)
    points[80] = (80, math.nan)
    events = run_batches("train/grad_norm", points)
    assert opened(events) == [("grad_norm_explosion", 60), ("non_finite", 80), ("grad_norm_explosion", 80)]


def test_a_lasting_throughput_drop_keeps_firing_until_it_recovers():
    points = level_curve(5, 50_000, 1_500, n=600)
    points[200:400] = [(s, v * 0.2) for s, v in points[200:400]]
    events = run_batches("perf/samples_per_s", points)
    assert [(type(e).__name__, e.rule, e.step) for e in events] == [
        ("Finding", "throughput_drop", 200), ("Cleared", "throughput_drop", 400)]


def test_gpu_util_collapse_after_n_low_points_having_been_high():
    rules = {"gpu_util_collapse": {"below": 10.0, "above": 50.0, "points": 5}}
    idle_from_start = [(s, 2.0) for s in range(50)]  # never high: a job that does not use its GPU yet
    assert run_batches("system/gpu_util", idle_from_start, rules=rules) == []
    points = [(s, min(100.0, v)) for s, v in level_curve(6, 90, 3, n=100)]
    points[40:60] = [(s, 3.0) for s, _ in points[40:60]]
    events = run_batches("system/gpu3_mem_util", points, rules=rules)
    assert [(type(e).__name__, e.step) for e in events] == [("Finding", 44), ("Cleared", 60)]


def test_a_late_point_cannot_clear_what_fires_now_and_a_new_attempt_is_judged_again():
    state: dict = {}
    first, state = anomaly.evaluate_batch(state, [("loss", 1, math.nan), ("loss", 2, math.nan)], DEFAULT_RULES,
                                          attempt=1)
    late, state = anomaly.evaluate_batch(state, [("loss", 0, 1.0)], DEFAULT_RULES, attempt=1)  # before the NaN
    resumed, state = anomaly.evaluate_batch(state, [("loss", 1, 1.0)], DEFAULT_RULES, attempt=2)  # from a checkpoint
    assert opened(first) == [("non_finite", 1)] and late == [] and resumed == [Cleared("non_finite", "loss", 1)]


def shuffled_batches(points: list[tuple[int, float]], size: int, seed: int) -> list[list[tuple[int, float]]]:
    batches = [points[i:i + size] for i in range(0, len(points), size)]
    random.Random(seed).shuffle(batches)
    return batches


def feed(key: str, batches, attempt: int = 1, state: dict | None = None,
         stored: dict | None = None) -> tuple[list, dict]:
    """Batches in the order given, with the history ingestion reads: the values stored so far (`stored`, step ->
    value, filled as they come)."""
    state = state or {}
    stored = {} if stored is None else stored
    events: list = []

    def history(key: str, step: int, count: int) -> list[float]:
        return [v for s, v in sorted(stored.items()) if s < step and math.isfinite(v)][-count:]

    for batch in batches:
        stored.update(batch)
        found, state = anomaly.evaluate_batch(state, [(key, s, v) for s, v in batch], DEFAULT_RULES, attempt,
                                              history)
        events += found
    return events, state


def test_a_batch_that_arrives_after_a_later_one_is_judged():
    """A spool delivering after an outage, MLflow's async logging, two senders: the NaN and the spike of a batch
    that comes after a later one open alerts, and close again at once when the later points already judged did
    not keep them firing."""
    points = loss_curve(7, n=400)
    points[150] = (1500, math.nan)
    points[180] = (1800, points[180][1] * 3)
    batches = [points[i:i + 50] for i in range(0, len(points), 50)]
    early, late = batches[:2] + batches[4:], batches[2:4]  # steps 1000-1990 arrive last, after the run went on
    events, state = feed("train/loss", early + late)
    assert opened(events) == [("non_finite", 1500), ("loss_spike", 1800)]
    assert [(type(e).__name__, e.rule) for e in events] == [
        ("Finding", "non_finite"), ("Cleared", "non_finite"), ("Finding", "loss_spike"), ("Cleared", "loss_spike")]
    key = state["keys"]["train/loss"]
    assert key["s"] == points[-1][0] and key["on"] == []  # the key's own progress is the later batches'


def test_late_points_open_nothing_that_is_open_already_and_never_clear_it():
    points = [(s, 1.0) for s in range(100)] + [(s, math.nan) for s in range(100, 200)]
    events, state = feed("train/loss", [points[100:], points[:100]])  # the NaN stretch first, then what came before
    assert opened(events) == [("non_finite", 100)] and not any(isinstance(e, Cleared) for e in events)
    assert state["keys"]["train/loss"]["on"] == ["non_finite"]


def test_a_batch_of_an_earlier_attempt_is_judged_without_moving_the_key_back():
    points = loss_curve(8, n=200)
    _, state = feed("train/loss", [points[:100]], attempt=1)
    _, state = feed("train/loss", [points[50:150]], attempt=2, state=state)  # resumed from a checkpoint
    events, after = feed("train/loss", [[(points[99][0] + 5, math.nan)]], attempt=1, state=state)  # a late one
    assert opened(events) == [("non_finite", points[99][0] + 5)]
    before, now = state["keys"]["train/loss"], after["keys"]["train/loss"]
    assert after["attempt"] == 2 and now == before


def arriving_shuffled(points: list[tuple[int, float]], size: int, seed: int) -> list[list[tuple[int, float]]]:
    """The first 100 points first (a run that has been logging a while), then the rest in batches of `size` in any
    order."""
    rest = [points[i:i + size] for i in range(100, len(points), size)]
    random.Random(seed).shuffle(rest)
    return [points[:100], *rest]


@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 120), nan=st.integers(0, 599),
       spike=st.integers(100, 599))
@settings(max_examples=40, deadline=None)
def test_every_nan_and_spike_is_found_whatever_order_the_batches_come_in(seed, size, nan, spike):
    rng = random.Random(seed)
    points = [(i * 10, 2.0 * (1 + rng.gauss(0, 0.02))) for i in range(600)]
    points[spike] = (points[spike][0], 8.0)
    points[nan] = (points[nan][0], math.nan)
    events, _ = feed("train/loss", arriving_shuffled(points, size, seed))
    found = opened(events)
    assert ("non_finite", points[nan][0]) in found
    if spike != nan:
        assert ("loss_spike", points[spike][0]) in found


@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 120))
@settings(max_examples=30, deadline=None)
def test_a_clean_decaying_loss_raises_nothing_whatever_order_the_batches_come_in(seed, size):
    """Late points are judged against the values logged before them, not the key's latest window, which lies
    lower down a decaying loss."""
    events, _ = feed("train/loss", arriving_shuffled(loss_curve(seed, n=600), size, seed))
    assert events == []


def test_hung_run_after_the_threshold_only():
    params = anomaly.DEFAULTS["hung_run"]
    assert anomaly.hung_run(14 * 60, 500, params) is None
    finding = anomaly.hung_run(16 * 60, 500, params)
    assert finding.rule == "hung_run" and finding.step == 500 and "16 minutes" in finding.message


@pytest.mark.parametrize(("rule", "params", "field"), [
    ("loss_spike", {"z": -1}, "params.z"),
    ("loss_spike", {"z": "high"}, "params.z"),
    ("loss_spike", {"window": 2.5}, "params.window"),
    ("loss_spike", {"min_points": 50, "window": 10}, "params.min_points"),
    ("throughput_drop", {"fraction": 1.5}, "params.fraction"),
    ("gpu_util_collapse", {"below": 60}, "params.below"),
    ("grad_norm_explosion", {"bogus": 1}, "params.bogus"),
    ("hung_run", {"minutes": True}, "params.minutes"),
    ("no_such_rule", {}, "rule"),
    ("loss_spike", [1, 2], "params"),
])
def test_bad_thresholds_name_the_parameter(rule, params, field):
    with pytest.raises(anomaly.ParamError) as error:
        anomaly.check_params(rule, params)
    assert error.value.field == field


def test_good_thresholds_merge_over_the_defaults():
    assert anomaly.check_params("loss_spike", {"z": 8}) == {"window": 100, "z": 8.0, "min_points": 20}
    assert anomaly.check_params("hung_run", None) == {"minutes": 15.0}


def test_keys_pick_their_rules():
    assert anomaly.rules_for_key("eval/loss") == ("non_finite", "loss_spike", "loss_plateau")
    assert "throughput_drop" in anomaly.rules_for_key("train/tokens_per_s")
    assert "gpu_util_collapse" in anomaly.rules_for_key("system/gpu_util")
    assert anomaly.rules_for_key("system/cpu_util") == ("non_finite",)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["train/loss", "train/grad_norm", "train/tokens_per_s", "system/gpu_util", "train/lr"]),
       st.integers(0, 10_000), st.lists(st.tuples(st.integers(0, 599), st.sampled_from(
           ["spike", "drop", "nan", "inf", "zero", "low", "falls", "rises"])), max_size=6), st.integers(7, 300),
       st.booleans())
def test_checking_quiet_runs_whole_finds_exactly_what_judging_every_point_finds(key, seed, faults, batch, idle):
    """The fast paths (runs of points checked whole while nothing fires, whole batches as ingestion hands them
    over, and batches during a lasting anomaly) against judging each point alone: the same events at the same
    steps, and the same state after every batch. `idle`: a GPU that is never busy, around its low threshold (its
    collapse rule cannot fire); "falls" and "rises": the series stays ten times lower or twenty times higher from
    there on."""
    rng = random.Random(seed)
    level = (10.0 if idle else 90.0) if "gpu" in key else 2.0
    values = [level * (1 + rng.gauss(0, 0.02)) for _ in range(600)]
    for at, kind in faults:
        if kind in ("falls", "rises"):
            values[at:] = [value * (0.1 if kind == "falls" else 20) for value in values[at:]]
            continue
        values[at] = {"spike": level * 20, "drop": level * 0.1, "nan": math.nan, "inf": math.inf, "zero": 0.0,
                      "low": 1.0}[kind]
    points = [(step * 5, value) for step, value in enumerate(values)]
    rules = anomaly.active_rules([])
    states: dict = {True: {}, False: {}, "batch": {}}
    found: dict = {True: [], False: [], "batch": []}
    for start in range(0, len(points), batch):
        chunk = points[start:start + batch]
        for fast in (True, False):
            events, states[fast] = anomaly.evaluate_key(key, states[fast], chunk, rules, fast=fast)
            found[fast] += [(type(e).__name__, e.rule, e.step) for e in events]
        events, states["batch"] = anomaly.evaluate_columns(key, states["batch"], [s for s, _ in chunk],
                                                           [v for _, v in chunk], rules)
        found["batch"] += [(type(e).__name__, e.rule, e.step) for e in events]
        assert states[True] == states[False] == states["batch"]
    assert found[True] == found[False] == found["batch"]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["train/loss", "train/grad_norm", "train/tokens_per_s", "system/gpu_util", "train/lr"]),
       st.integers(0, 10_000), st.lists(st.tuples(st.integers(0, 599), st.sampled_from(
           ["spike", "drop", "nan", "inf", "zero"])), max_size=4), st.integers(7, 300), st.integers(0, 20))
def test_a_batch_judged_with_its_values_as_an_array_is_judged_the_same(key, seed, faults, batch, overlap):
    """Ingestion hands the checks each key's values converted once (points.value_arrays): the same events and state
    as from the list alone, also for a batch whose first points arrive after later ones (`overlap` points of the
    batch before it again, judged late: the array is cut as the list is)."""
    rng = random.Random(seed)
    level = 90.0 if "gpu" in key else 2.0
    values = [level * (1 + rng.gauss(0, 0.02)) for _ in range(600)]
    for at, kind in faults:
        values[at] = {"spike": level * 20, "drop": level * 0.1, "nan": math.nan, "inf": math.inf, "zero": 0.0}[kind]
    points = [(step * 5, value) for step, value in enumerate(values)]
    rules = anomaly.active_rules([])
    states: dict = {"list": {}, "array": {}}
    for start in range(0, len(points), batch):
        chunk = points[max(0, start - overlap):start + batch]
        steps, column = [s for s, _ in chunk], [v for _, v in chunk]
        found = {}
        for way in ("list", "array"):
            array = np.asarray(column, dtype=float) if way == "array" else None
            events, states[way] = anomaly.evaluate_columns(key, states[way], steps, column, rules, array=array,
                                                           history=lambda key, step, count: [])
            found[way] = [(type(e).__name__, e.rule, e.step) for e in events]
        assert found["list"] == found["array"]
        assert states["list"] == states["array"]


@pytest.mark.parametrize("key", ["train/loss", "train/grad_norm", "train/tokens_per_s", "system/gpu_util"])
def test_a_quiet_batch_with_a_full_window_is_judged_whole(key, monkeypatch):
    """A healthy run's batch takes the whole-batch path (the property test above holds it to the same verdicts);
    one with an anomaly in it goes point by point and finds it."""
    level = 90.0 if "gpu" in key else 2.0
    rng = random.Random(3)
    points = [(step, level * (1 + rng.gauss(0, 0.01))) for step in range(400)]
    rules = anomaly.active_rules([])
    _, state = anomaly.evaluate_columns(key, {}, [s for s, _ in points], [v for _, v in points], rules)
    judged_one_by_one = []
    real = anomaly.evaluate_key
    monkeypatch.setattr(anomaly, "evaluate_key", lambda *a, **k: judged_one_by_one.append(1) or real(*a, **k))
    quiet = [(step, level * (1 + rng.gauss(0, 0.01))) for step in range(400, 2400)]
    events, _ = anomaly.evaluate_columns(key, state, [s for s, _ in quiet], [v for _, v in quiet], rules)
    assert events == [] and judged_one_by_one == []
    quiet[1500] = (quiet[1500][0], {"system/gpu_util": 1.0, "train/tokens_per_s": 0.1}.get(key, 100.0) * level)
    if "gpu" in key:
        quiet[1500:1510] = [(s, 1.0) for s, _ in quiet[1500:1510]]
    events, _ = anomaly.evaluate_columns(key, state, [s for s, _ in quiet], [v for _, v in quiet], rules)
    assert judged_one_by_one and [e.step for e in events if isinstance(e, Finding)][:1] == [
        quiet[1504 if "gpu" in key else 1500][0]]


@pytest.mark.parametrize(("key", "level", "later"), [("train/tokens_per_s", 50_000.0, 0.1),
                                                      ("train/grad_norm", 1.0, 30.0), ("system/gpu_util", 5.0, 1.0)])
def test_a_batch_in_a_lasting_anomaly_or_of_an_idle_gpu_is_judged_whole(key, level, later, monkeypatch):
    """A throughput that stays down and a gradient norm that stays up keep their alert open batch after batch
    without judging each point, and so does a GPU that was never busy (no collapse to find)."""
    rng = random.Random(5)
    rules = anomaly.active_rules([])
    steady = [level * (1 + rng.gauss(0, 0.01)) for _ in range(400)]
    _, state = anomaly.evaluate_columns(key, {}, list(range(400)), steady, rules)
    _, state = anomaly.evaluate_columns(key, state, [400], [level * later], rules)
    judged_one_by_one = []
    real = anomaly.evaluate_key
    monkeypatch.setattr(anomaly, "evaluate_key", lambda *a, **k: judged_one_by_one.append(1) or real(*a, **k))
    lasting = [level * later * (1 + rng.gauss(0, 0.01)) for _ in range(2000)]
    events, after = anomaly.evaluate_columns(key, state, list(range(401, 2401)), lasting, rules)
    assert events == [] and judged_one_by_one == [] and after["on"] == state["on"] and after["s"] == 2400


@pytest.mark.parametrize("width", [5, 6, 99, 100])
def test_row_medians_are_numpys_medians(width):
    """The quiet-batch check takes each window's median by partitioning in place: bit for bit np.median's."""
    rng = np.random.default_rng(width)
    for scale in (1.0, 1e-9, 1e9):
        rows = rng.normal(size=(40, width)) * scale
        assert np.array_equal(_row_medians(rows.copy()), np.median(rows, axis=1))
