"""Serializer conventions shared by every app."""

from __future__ import annotations

import json
import unicodedata
from typing import TYPE_CHECKING, Any, ClassVar

from rest_framework import serializers

from core.parsers import nested_deeper_than

FREE_FORM_MAX_BYTES = 64 * 1024
FREE_FORM_MAX_DEPTH = 10


def copy_fields(fields: dict[str, serializers.Field]) -> dict[str, serializers.Field]:
    """Fields for one serializer instance, copied from fields that were built but never bound."""
    return {name: fresh_copy(field) for name, field in fields.items()}


def fresh_copy(field: serializers.Field) -> serializers.Field:
    """A shallow copy of an unbound field: binding sets its name and parent on the copy, and nothing else of it
    changes afterwards. What an instance does fill in is dropped so the copy builds its own: a nested serializer's
    bound fields (rebuilt from its class on first use), and the child of a list, dict or many-related field (copied
    the same way, with the copy as its parent). So no bound field is ever shared between instances, at a fraction of the
    cost of DRF's deep copy, which re-runs every field's __init__."""
    clone = object.__new__(type(field))  # copy.copy's generic protocol costs three times as much
    clone.__dict__.update(field.__dict__)
    clone.__dict__.pop("fields", None)
    for attr in ("child", "child_relation"):
        child = field.__dict__.get(attr)
        if child is not None:
            child = fresh_copy(child)
            child.parent = clone  # the child was bound when its parent was built; only the parent is new
            setattr(clone, attr, child)
    return clone


# The mixin's host, for mypy: without DRF's stubs `Serializer` is an unknown (Any) base, so `super().get_fields` is
# found on it. At run time a plain mixin, listed before the serializer class.
if TYPE_CHECKING:
    from rest_framework.serializers import Serializer as _Serializer
else:
    _Serializer = object


class FieldsBuiltOnce(_Serializer):
    """For serializers whose fields do not depend on the instance or the context (every serializer here).

    DRF deep-copies every declared field for every serializer instance, re-running each field's __init__, and a
    ModelSerializer also rebuilds every field from the model: together about 40% of a job submission's CPU. Build
    them once per class instead, and give each instance copies.
    """

    _fields_built_once: ClassVar[dict[str, serializers.Field]]  # set on each class by its first instance

    def get_fields(self) -> dict[str, serializers.Field]:
        cls = type(self)
        built = cls.__dict__.get("_fields_built_once")
        if built is None:
            built = super().get_fields()
            cls._fields_built_once = built
        return copy_fields(built)


class StrictSerializer(FieldsBuiltOnce, serializers.Serializer):
    """Rejects fields the endpoint does not know, naming them, instead of silently ignoring a typo."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class StrictModelSerializer(StrictSerializer, serializers.ModelSerializer):
    pass


class FreeFormJSON:
    """The validator of every free-form JSON value a user stores (a job's launcher options, labels and env, a
    cluster's extra env and tolerations): at most `max_bytes` as JSON and `max_depth` levels of lists and mappings,
    and JSON's own values (no NaN or infinity, which PostgreSQL's jsonb and SQLite's JSON check refuse: a 500).

    A body's own limits (core.parsers) are far wider; this is what one field may keep. The 400 names the field."""

    def __init__(self, max_bytes: int = FREE_FORM_MAX_BYTES, max_depth: int = FREE_FORM_MAX_DEPTH) -> None:
        self.max_bytes = max_bytes
        self.max_depth = max_depth

    def __call__(self, value: Any) -> None:
        if nested_deeper_than(value, self.max_depth):
            raise serializers.ValidationError(f"Nested more than {self.max_depth} levels deep.")
        try:
            size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode())
        except ValueError:
            raise serializers.ValidationError("Numbers must be finite: JSON has no NaN or infinity.") from None
        if size > self.max_bytes:
            raise serializers.ValidationError(f"At most {self.max_bytes:,} bytes as JSON; this is {size:,}.")


def has_control_character(text: str) -> bool:
    """Whether `text` holds a control character (a newline, tab, escape, NUL...): none belongs in a name, and a
    newline or carriage return in one breaks the CSV, log and terminal lines it is written to."""
    return any(unicodedata.category(c) == "Cc" for c in text)


def no_control_characters(value: str) -> None:
    """The validator of names a user types (an experiment, a checkpoint path): a 400 naming the field."""
    if has_control_character(value):
        raise serializers.ValidationError("Must not contain control characters (newlines, tabs, escapes).")


class WholeNumberField(serializers.IntegerField):
    """An integer given as a number: DRF's IntegerField also takes "5" and "5.0" as text, so a spec that says
    `replicas: "5"` (a quoted number, a templating mistake) passed unnoticed. A float with no fraction (5.0, as some
    JSON writers print integers) is taken."""

    default_error_messages = {"not_a_number": "A whole number is required, not {kind}."}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool):
            self.fail("not_a_number", kind="true or false")
        if isinstance(data, str):
            self.fail("not_a_number", kind=f"the text {data[:20]!r}")
        return super().to_internal_value(data)
