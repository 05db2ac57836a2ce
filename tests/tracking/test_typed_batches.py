"""A batch's body decoded straight into typed points (tracking.bodies.typed_body) means what the general path reads
from it: the same fields, the same clean points, the same refusal naming the same point, for any body; and a plain
batch does take the typed path (else the comparison would compare the general path with itself)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ParseError

from tracking import bodies
from tracking.bodies import BatchJSONParser
from tracking.mlflow.translate import UNSTORED_METRIC_FIELDS
from tracking.series.validate import BatchError, TypedPoints, clean_points

NOW_MS = 1_700_000_000_000
BIG = 2**63

keys = st.sampled_from(["loss", "lr", "train/acc", "", "x" * 251, "bad\x07key", 7, None])
values = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-BIG * 4, BIG * 4),
                   st.sampled_from(["NaN", "Infinity", "-Infinity", "nan", "1.5", True, None, [1.0], {"v": 1}]))
steps = st.one_of(st.integers(0, 30), st.integers(-3, BIG + 3), st.sampled_from([2.0, 2.5, -0.0, True, "3", None]))
fields = {"key": keys, "value": values, "step": steps, "timestamp": steps, "model_id": st.just("m-1"),
          "extra": st.just(1)}
common = st.fixed_dictionaries({"key": st.sampled_from(["loss", "lr", "train/acc"]),
                                "value": st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                                                   st.integers(-BIG, BIG)),
                                "step": st.integers(0, 30)},
                               optional={"timestamp": st.one_of(st.none(), st.integers(0, BIG - 1))})
# Decoded as typed points, and refused by clean_points: a bad key, a string that is no number.
odd = st.fixed_dictionaries({"key": st.sampled_from(["", "x" * 251, "bad\x07key", "loss"]),
                             "value": st.sampled_from(["NaN", "-Infinity", "nan", "1.5", 2.0])})
unusual = st.fixed_dictionaries({}, optional=fields)
points = st.lists(st.one_of(common, common, common, unusual, st.integers(), st.lists(st.integers(), max_size=2)),
                  max_size=12)
plain_points = st.lists(st.one_of(common, common, common, common, odd), max_size=12)
pairs = st.one_of(st.dictionaries(st.sampled_from(["a", "b"]), st.one_of(st.text(max_size=3), st.integers(
    -BIG * 2, BIG * 2), st.booleans(), st.none())), st.lists(st.fixed_dictionaries(
        {"key": st.sampled_from(["a", "b"]), "value": st.text(max_size=3)}), max_size=2))
others = {"params": pairs, "tags": pairs, "attempt": st.one_of(st.integers(-1, BIG * 2), st.just("2")),
          "run_id": st.sampled_from(["12", 12])}
batch_bodies = st.one_of(
    st.fixed_dictionaries({"metrics": plain_points}, optional=others),
    st.fixed_dictionaries({}, optional={"metrics": st.one_of(points, st.none(), st.just({"key": "loss"})),
                                        "unknown": st.just(1), **others}))


def general(body: bytes, monkeypatch: pytest.MonkeyPatch) -> object:
    with monkeypatch.context() as patched:
        patched.setattr(bodies, "typed_body", lambda body: None)
        return read(body)


def read(body: bytes) -> object:
    """What the parser gives, or the ParseError it raises."""
    try:
        return BatchJSONParser().load(body)
    except ParseError as error:
        return ("refused", str(error.detail))


def cleaned(data: object, ignored: frozenset[str]) -> object:
    """The points clean_points makes of a body's metrics, or its refusal (field and message)."""
    if not isinstance(data, dict):
        return data
    try:
        return clean_points(data.get("metrics"), NOW_MS, ignored=ignored)
    except BatchError as error:
        return ("refused", error.field, error.message)


def same_reading(body: bytes, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Asserts both paths read `body` alike; whether the typed path took it."""
    typed, plain = read(body), general(body, monkeypatch)
    if isinstance(typed, dict) and isinstance(plain, dict):
        assert {k: v for k, v in typed.items() if k != "metrics"} == {k: v for k, v in plain.items() if k != "metrics"}
        assert typed.keys() == plain.keys()
    else:
        assert typed == plain
    for ignored in (frozenset(), UNSTORED_METRIC_FIELDS):  # Tidal's endpoint, MLflow's
        assert repr(cleaned(typed, ignored)) == repr(cleaned(plain, ignored))  # repr: NaN equals itself
    return isinstance(typed, dict) and type(typed.get("metrics")) is TypedPoints


def test_any_body_means_the_same_through_either_path(monkeypatch):
    took_typed = []

    @settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(batch_bodies)
    def check(body: dict) -> None:
        took_typed.append(same_reading(json.dumps(body).encode(), monkeypatch))

    check()
    assert 0.1 < sum(took_typed) / len(took_typed) < 0.9  # both paths were compared, often


@pytest.mark.parametrize("body", [
    b'{"metrics": [{"key": "a", "value": 1, "value": 2}]}',  # a repeated field: the last one, as orjson
    b'{"metrics": [{"key": "a", "value": 1, "key": "b"}]}',
    b'{"metrics": [{"key": "a", "value": 9007199254740993}]}',  # beyond a float's integers: rounded alike
    b'{"metrics": [{"key": "a", "value": 123456789012345678901234567890}]}',
    b'{"metrics": [{"key": "a", "value": 1e400}]}',
    b'{"metrics": [{"key": "a", "value": NaN}]}',
    b'{"metrics": [{"key": "\\ud800", "value": 1}]}',
    b'{"metrics": [{"key": "a\\u0000", "value": 1}]}',
    b'{"metrics": [{"key": "a", "value": 1}], "tags": {"t": "\\ud800"}}',
    b'{"metrics": [{"key": "a", "value": 1}], "params": {"p": 18446744073709551616}}',
    b'{"metrics": [{"key": "a", "value": 1}], "tags": ' + b"[" * 40 + b"]" * 40 + b"}",
    b'{"metrics": [{"key": "a", "value": 1, "step": 2}, {"key": "a", "value": 3, "step": 1}]}',
    b'{"metrics": [{"key": "a", "value": 1}]',
    b'[{"key": "a", "value": 1}]',
    b'{"metrics": []}',
])
def test_bodies_at_the_edges_mean_the_same(body, monkeypatch):
    same_reading(body, monkeypatch)


def test_points_deeper_than_a_low_depth_limit_are_refused_on_either_path(settings, monkeypatch):
    settings.TIDAL_MAX_BODY_DEPTH = 2
    body = b'{"metrics": [{"key": "a", "value": 1}]}'
    assert same_reading(body, monkeypatch) is False
    assert read(body)[0] == "refused"


def test_a_plain_batch_takes_the_typed_path_and_an_mlflow_point_linked_to_a_model_does_not(monkeypatch):
    plain = {"run_id": "3", "metrics": [{"key": "loss", "value": 0.5, "step": 1, "timestamp": NOW_MS}],
             "params": [{"key": "lr", "value": "0.1"}]}
    assert same_reading(json.dumps(plain).encode(), monkeypatch)
    plain["metrics"][0]["model_id"] = "m-1"
    assert not same_reading(json.dumps(plain).encode(), monkeypatch)
