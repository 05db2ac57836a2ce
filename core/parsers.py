"""Request bodies as JSON or YAML, parsed within limits checked before the work they would cost.

A body is refused, never half-parsed, when it is:

- over the size limit: 413 (`DATA_UPLOAD_MAX_MEMORY_SIZE` for JSON, Django's 2.5 MB by default; `YAML_MAX_BYTES`
  for YAML, whose pure-Python parser is a hundred times slower per byte);
- nested deeper than `TIDAL_MAX_BODY_DEPTH` lists and mappings: 400 (Python's parsers recurse, and 100,000 `[`
  answered 500);
- a YAML document whose aliases repeat more than `YAML_MAX_ALIAS_VALUES` values, or an alias inside the node it
  names: 400 (420 bytes of nested aliases once expanded to 39 MB of stored JSON);
- holding an integer of more than `MAX_INTEGER_DIGITS` (4,300) digits: 400 (converting one costs time quadratic
  in its length, and YAML's base-60 integers multiply it; a 5,000-digit one answered 500);
- holding a NUL character: 400 (PostgreSQL stores none in text or jsonb, nor compares one; form bodies too).

YAML bodies carry JSON's values only: strings, numbers, booleans, null, lists and mappings with string keys (a date
stays a string, `!!binary` or `!!set` are refused), so a YAML job and a JSON job are the same data. The errors are
DRF's ParseError (400, code `parse_error`) and BodyTooLarge (413), in the API's error shape.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import IO, Any

import yaml
from django.conf import settings
from rest_framework import exceptions, parsers, status
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer

from core.digits import is_digits

YAML_MAX_BYTES = 200_000  # a job spec is a few kilobytes; also the submit page's limit
YAML_MAX_ALIAS_VALUES = 10_000
# Python's own guard (4,300 by default): converting an integer costs time quadratic in its digits, and this is where
# that starts to matter. JSON's parser converts with int(), which enforces it; YAML's is checked before converting.
MAX_INTEGER_DIGITS = sys.get_int_max_str_digits() or sys.int_info.default_max_str_digits

_STR = "tag:yaml.org,2002:str"
# A JSON string holds NUL only as the escape \u0000; one preceded by an odd run of backslashes is text, not an escape.
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


class BodyTooLarge(exceptions.APIException):
    """413: a request body over its size limit, refused before it is parsed. Also the API's answer to Django's own
    RequestDataTooBig (form bodies), which Django answers with a 400 page."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"

    def __init__(self, limit: int, advice: str = "") -> None:
        super().__init__(" ".join(filter(None, [f"The body is over the size limit of {limit:,} bytes.", advice])))


class BodyProblem(ValueError):
    """Why a body was refused, worded for its sender."""


def max_depth() -> int:
    return settings.TIDAL_MAX_BODY_DEPTH


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests lists and dicts more than `limit` levels (a flat list or dict is one level).

    It walks every point of a 10,000-point batch, so it is written for speed (~2 ms there): exact types, as parsers
    and serializers build them, and a plain loop (`any()` over a generator costs three times as much). Its
    recursion stops at `limit`."""
    kind = type(value)
    if kind is dict:
        value = value.values()
    elif kind is not list:
        return False
    if limit == 0:
        return True
    for item in value:
        kind = type(item)
        if (kind is dict or kind is list) and nested_deeper_than(item, limit - 1):
            return True
    return False


def too_deep(limit: int) -> str:
    return f"Lists and mappings are nested more than {limit} levels deep."


def _refuse_constant(name: str) -> None:
    raise BodyProblem(f"{name} is not a JSON number.")


def load_json(text: str) -> Any:
    """The JSON document in `text` (raises BodyProblem)."""
    if "\\u0000" in text and _JSON_NUL.search(text):  # the substring test is 50 times faster
        raise BodyProblem("A string holds a NUL character (\\u0000), which cannot be stored.")
    limit = max_depth()
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:  # nested deeper than Python's stack: the document is over the limit, whatever it is
        raise BodyProblem(too_deep(limit)) from None
    except (BodyProblem, json.JSONDecodeError) as error:
        raise BodyProblem(f"JSON parse error - {error}") from None
    except ValueError:  # the one other: int() refusing more digits than MAX_INTEGER_DIGITS
        raise BodyProblem(f"An integer is longer than {MAX_INTEGER_DIGITS:,} digits.") from None
    if nested_deeper_than(data, limit):
        raise BodyProblem(too_deep(limit))
    return data


class _LimitedLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader counting while it composes: how deep each node sits, aliases included, and how many values
    aliases repeat. An alias is a reference to the node it names, so it costs nothing here; it is every consumer
    after (a serializer, json.dumps, the database) that walks each repetition."""

    def __init__(self, stream: str, depth_limit: int) -> None:
        super().__init__(stream)
        self.depth_limit = depth_limit
        self.depth = 0  # lists and mappings around the node being composed
        self.deepest = 0  # the deepest level reached inside the innermost of them
        self.values = 0  # values composed so far, each alias counted as the values of the node it names
        self.repeated = 0  # of those, the values aliases added
        self.weights: dict[str, tuple[int, int]] = {}  # anchor -> (values, levels) of its node

    def _reach(self, depth: int, mark: yaml.Mark) -> None:
        if depth > self.depth_limit:
            raise yaml.composer.ComposerError(None, None, too_deep(self.depth_limit).rstrip("."), mark)
        self.deepest = max(self.deepest, depth)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.anchors and event.anchor not in self.weights:
                raise yaml.composer.ComposerError(
                    None, None, f"the alias *{event.anchor} is inside the node it names", event.start_mark)
            values, levels = self.weights.get(event.anchor, (0, 0))  # an undefined one: PyYAML's own error
            self.values += values
            self.repeated += values
            if self.repeated > YAML_MAX_ALIAS_VALUES:
                raise yaml.composer.ComposerError(
                    None, None, f"aliases repeat more than {YAML_MAX_ALIAS_VALUES:,} values", event.start_mark)
            self._reach(self.depth + levels, event.start_mark)
            return super().compose_node(parent, index)
        if isinstance(event, yaml.ScalarEvent):
            if "\x00" in event.value:
                raise yaml.composer.ComposerError(None, None, "a NUL character cannot be stored", event.start_mark)
            node = super().compose_node(parent, index)
            self.values += 1
            if event.anchor is not None:
                self.weights[event.anchor] = (1, 0)
            return node
        # A list or a mapping: one level deeper, as nested_deeper_than counts them.
        outer_deepest, first_value = self.deepest, self.values
        self.depth += 1
        self._reach(self.depth, event.start_mark)
        self.deepest = self.depth
        node = super().compose_node(parent, index)
        self.values += 1
        if event.anchor is not None:
            self.weights[event.anchor] = (self.values - first_value, self.deepest - self.depth + 1)
        self.depth -= 1
        self.deepest = max(outer_deepest, self.deepest)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        mapping = super().construct_mapping(node, deep=deep)
        for key_node, _ in node.value:  # merge keys (<<) are gone: their pairs are in node.value now
            if key_node.tag != _STR:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key_node.value!r} is not a string (quote it)", key_node.start_mark)
        return mapping

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        if sum(c.isalnum() for c in node.value) > MAX_INTEGER_DIGITS:  # signs, "_" and ":" apart
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer is longer than {MAX_INTEGER_DIGITS:,} digits", node.start_mark)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a finite number, which JSON cannot hold", node.start_mark)
        return value


# JSON's values only: a date stays the string it was written as; binary, sets, ordered maps and pairs are refused.
_LimitedLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag in ("int", "float"):
    _LimitedLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", getattr(_LimitedLoader, f"construct_yaml_{_tag}"))
for _tag in ("binary", "timestamp", "set", "omap", "pairs"):
    _LimitedLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _LimitedLoader.construct_undefined)


def load_yaml(text: str) -> Any:
    """The YAML document in `text` (raises BodyProblem naming the line and column)."""
    loader = _LimitedLoader(text, max_depth())
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        what = error.problem or error.context or "could not parse"
        where = f" on line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise BodyProblem(f"Invalid YAML{where}: {what}.") from None
    except yaml.YAMLError as error:
        raise BodyProblem(f"Invalid YAML: {error}.") from None
    except RecursionError:  # only with a depth limit set beyond Python's stack
        raise BodyProblem(too_deep(loader.depth_limit)) from None
    finally:
        loader.dispose()


def read_body(stream: IO[bytes], parser_context: dict | None, limit: int) -> bytes:
    """The body, read no further than `limit` bytes."""
    request = (parser_context or {}).get("request")
    declared = request.META.get("CONTENT_LENGTH") if request is not None else None
    if declared and is_digits(declared) and int(declared) > limit:
        raise BodyTooLarge(limit)
    body = stream.read(limit + 1)
    if len(body) > limit:
        raise BodyTooLarge(limit)
    return body


def read_text(stream: IO[bytes], parser_context: dict | None, limit: int) -> str:
    """The body as text, read no further than `limit` bytes."""
    return decode(read_body(stream, parser_context, limit))


def decode(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError("The body is not UTF-8 text.") from None


class JSONParser(BaseParser):
    """DRF's JSON parser with the limits above (DEFAULT_PARSER_CLASSES)."""

    media_type = "application/json"
    renderer_class = JSONRenderer

    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: dict | None = None) -> Any:
        return self.load(read_body(stream, parser_context, settings.DATA_UPLOAD_MAX_MEMORY_SIZE))

    def load(self, body: bytes) -> Any:
        """The document in a body within the size limit (raises ParseError)."""
        try:
            return load_json(decode(body))
        except BodyProblem as problem:
            raise ParseError(str(problem)) from None


class YAMLParser(BaseParser):
    """YAML bodies (e.g. `tidal submit job.yaml`), with errors that name the line."""

    media_type = "application/yaml"

    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: dict | None = None) -> Any:
        text = read_text(stream, parser_context, YAML_MAX_BYTES)
        try:
            data = load_yaml(text)
        except BodyProblem as problem:
            raise ParseError(str(problem)) from None
        if not isinstance(data, dict):
            raise ParseError("The YAML document must be a mapping of field names to values.")
        return data


def _refuse_nul(data: Any) -> None:
    """Form fields are text only; one holding a NUL (%00) is refused as a JSON string holding one is."""
    for key, values in data.lists():
        if "\x00" in key or any("\x00" in value for value in values):
            raise ParseError("A field holds a NUL character (%00), which cannot be stored.")


class FormParser(parsers.FormParser):
    """DRF's form parser, refusing NUL characters (DEFAULT_PARSER_CLASSES)."""

    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: dict | None = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        _refuse_nul(data)
        return data


class MultiPartParser(parsers.MultiPartParser):
    """DRF's multipart parser, refusing NUL characters in its fields (DEFAULT_PARSER_CLASSES)."""

    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: dict | None = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        _refuse_nul(parsed.data)
        return parsed
