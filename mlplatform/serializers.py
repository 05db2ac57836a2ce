"""Serializer conventions shared by every app."""

from __future__ import annotations

import copy
from typing import Any

from rest_framework import serializers


def copy_fields(fields: dict[str, serializers.Field]) -> dict[str, serializers.Field]:
    """Fields for one serializer instance. A leaf field is copied shallowly (binding sets its name and parent on the
    copy; nothing else of it changes afterwards); a field holding child fields (nested serializers, lists, dicts,
    many-related fields) is copied deeply, so no child is ever shared between instances."""
    return {name: copy.deepcopy(field) if _has_children(field) else copy.copy(field) for name, field in fields.items()}


def _has_children(field: serializers.Field) -> bool:
    return isinstance(field, serializers.BaseSerializer) or hasattr(field, "child") or hasattr(field, "child_relation")


class FieldsBuiltOnce:
    """For serializers whose fields do not depend on the instance or the context (every serializer here).

    DRF deep-copies every declared field for every serializer instance, re-running each field's __init__, and a
    ModelSerializer also rebuilds every field from the model: together about 40% of a job submission's CPU. Build
    them once per class instead, and give each instance copies.
    """

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
