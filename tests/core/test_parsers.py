"""JSON and YAML bodies parsed within limits: size, nesting, alias expansion, integer length, NUL characters."""

from __future__ import annotations

import json
import time

import pytest

from core.parsers import MAX_INTEGER_DIGITS, YAML_MAX_ALIAS_VALUES, BodyProblem, load_json, load_yaml


def laughs(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs": each level an anchored list of `width` aliases of the level below."""
    lines = ['a0: &a0 ["lol"]']
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * width)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


def refused(load, text: str, *words: str) -> str:
    with pytest.raises(BodyProblem) as info:
        load(text)
    message = str(info.value)
    assert all(word in message for word in words), message
    return message


class TestYaml:
    def test_nested_aliases_are_refused_before_they_expand(self):
        started = time.perf_counter()
        refused(load_yaml, laughs(), "aliases repeat more than", "line")
        assert time.perf_counter() - started < 1

    def test_aliases_within_the_limit_and_merge_keys_still_work(self):
        data = load_yaml("base: &b {x: 1, y: [1, 2]}\nuse: {<<: *b, y: 3}\nagain: *b\n")
        assert data == {"base": {"x": 1, "y": [1, 2]}, "use": {"x": 1, "y": 3}, "again": {"x": 1, "y": [1, 2]}}

    def test_the_alias_limit_counts_the_values_aliases_repeat(self):
        hundred = f"a: &a [{', '.join(str(i) for i in range(99))}]\n"  # the list and its 99 items
        aliases = YAML_MAX_ALIAS_VALUES // 100
        assert len(load_yaml(hundred + f"b: [{', '.join(['*a'] * aliases)}]\n")["b"]) == aliases
        refused(load_yaml, hundred + f"b: [{', '.join(['*a'] * (aliases + 1))}]\n", "aliases repeat")

    def test_an_alias_inside_the_node_it_names_is_refused(self):
        refused(load_yaml, "a: &x {b: *x}\n", "inside the node it names")

    @pytest.mark.parametrize("lists", [32, 5_000])
    def test_deep_nesting_is_refused(self, lists):
        """The mapping and 31 lists in it are 32 levels, the limit; 5,000 answered 500."""
        assert load_yaml("a: " + "[" * 31 + "]" * 31)
        refused(load_yaml, "a: " + "[" * lists + "]" * lists, "nested more than 32 levels")

    def test_depth_counts_through_aliases(self):
        deep = "[" * 20 + "]" * 20
        assert load_yaml(f"a: &d {deep}\nb: {'[' * 11}*d{']' * 11}\n")
        refused(load_yaml, f"a: &d {deep}\nb: {'[' * 12}*d{']' * 12}\n", "nested more than 32 levels")

    def test_the_depth_limit_is_a_setting(self, settings):
        settings.TIDAL_MAX_BODY_DEPTH = 3
        assert load_yaml("a: [[1]]") and load_json('{"a": [[1]]}')
        refused(load_yaml, "a: [[[1]]]", "nested more than 3 levels")
        refused(load_json, '{"a": [[[1]]]}', "nested more than 3 levels")

    @pytest.mark.parametrize("number", ["1" * 5_000, "1" + ":1" * 5_000, "0x" + "f" * 5_000])
    def test_long_integers_are_refused(self, number):
        started = time.perf_counter()
        refused(load_yaml, f"a: {number}\n", f"integer is longer than {MAX_INTEGER_DIGITS:,} digits")
        assert time.perf_counter() - started < 1

    def test_only_jsons_values(self):
        assert load_yaml("day: 2026-01-01\nat: 2026-01-01 10:00:00\n") == {"day": "2026-01-01",
                                                                           "at": "2026-01-01 10:00:00"}
        refused(load_yaml, "a: !!binary aGVsbG8=\n", "constructor")
        refused(load_yaml, "a: !!set {x}\n", "constructor")
        refused(load_yaml, "a: .inf\n", "not a finite number")
        refused(load_yaml, "a: .nan\n", "not a finite number")
        refused(load_yaml, "1: a\n", "is not a string")
        refused(load_yaml, "a: {on: 1}\n", "is not a string")

    @pytest.mark.parametrize("text", ['a: "x\\0y"\n', 'a: "\\x00"\n', '"k\\u0000": 1\n'])
    def test_nul_characters_are_refused(self, text):
        refused(load_yaml, text, "NUL")

    def test_syntax_errors_name_the_line(self):
        refused(load_yaml, "a: 1\nb: [\n", "Invalid YAML on line 3")


class TestJson:
    def test_deep_nesting_is_refused(self):
        refused(load_json, "[" * 100_000, "nested more than 32 levels")
        refused(load_json, "[" * 33 + "]" * 33, "nested more than 32 levels")
        assert load_json("[" * 32 + "]" * 32)

    def test_long_integers_are_refused(self):
        refused(load_json, '{"a": ' + "1" * 5_000 + "}", f"integer is longer than {MAX_INTEGER_DIGITS:,} digits")
        assert load_json('{"a": -' + "9" * MAX_INTEGER_DIGITS + "}")

    @pytest.mark.parametrize("text", ['{"a": "x\\u0000"}', '{"a\\u0000": 1}', '["\\\\\\u0000"]'])
    def test_nul_characters_are_refused(self, text):
        refused(load_json, text, "NUL")

    def test_an_escaped_backslash_before_u0000_is_text(self):
        assert load_json('["\\\\u0000"]') == ["\\u0000"]

    def test_nan_and_infinity_are_not_json(self):
        refused(load_json, '{"a": NaN}', "not a JSON number")

    def test_a_batch_of_10000_points_parses(self):
        body = json.dumps({"metrics": [{"key": "loss", "value": 0.5, "step": i} for i in range(10_000)]})
        assert len(load_json(body)["metrics"]) == 10_000
