"""Serializer conventions shared by every app."""

from __future__ import annotations

import copy
from typing import Any

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Rejects fields the endpoint does not know, naming them, instead of silently ignoring a typo."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class StrictModelSerializer(StrictSerializer, serializers.ModelSerializer):
    pass


class FieldsBuiltOnce:
    """Mixed into a ModelSerializer whose fields do not depend on the instance or the context.

    ModelSerializer rebuilds every field from the model for every instance it serializes, which was a quarter of a
    job submission's CPU. Build them once per class and give each instance a deep copy, as DRF itself does with
    declared fields.
    """

    def get_fields(self) -> dict[str, serializers.Field]:
        cls = type(self)
        built = cls.__dict__.get("_fields_built_once")
        if built is None:
            built = super().get_fields()
            cls._fields_built_once = built
        return copy.deepcopy(built)
