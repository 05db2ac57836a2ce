"""List filters every endpoint shares: names of related objects, ids, and moments in time.

Names ("?flavor=nvidia-h100-80gb") are refused when the caller cannot see them.

A plain CharFilter on `flavor__name` answers an unknown name with an empty page, which reads as "nothing there" when
the truth is a typo. These filters validate the name against the caller's scoped selector instead, so the request
fails with the API's one error shape: 400 `{"fields": {"flavor": ["No flavor named 'bogus'."]}}`. Because the
lookup goes through the selector, a project of another tenant gets the same answer as one that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import django_filters
from django import forms
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import FieldDoesNotExist
from django.db.models import QuerySet
from django.db.models.constants import LOOKUP_SEP
from django_filters.fields import IsoDateTimeField
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter

# One wording for every endpoint; Django fills in %(value)s itself, so a name containing "%" is safe.
UNKNOWN_NAME = "No {noun} named '%(value)s'."


def unknown_name(field: str, value: str, *, noun: str) -> ValidationError:
    """The same 400 for views that check a name themselves rather than through a FilterSet."""
    return ValidationError({field: [UNKNOWN_NAME.format(noun=noun) % {"value": value}]})


def name_filter(field_name: str, *, noun: str, visible: Callable[[Any], QuerySet],
                to_field_name: str = "name") -> django_filters.ModelChoiceFilter:
    """Filter on the related object `field_name` by its `to_field_name`, among `visible(user)`.

    `visible` is a selector of the caller (e.g. `projects_for_user`): what it leaves out is unknown, whether it
    does not exist or belongs to another tenant.
    """

    def choices(request: Any) -> QuerySet:
        # django-filter passes the request; schema generation may build the form without one.
        return visible(getattr(request, "user", None) or AnonymousUser())

    return django_filters.ModelChoiceFilter(
        field_name=field_name, to_field_name=to_field_name, queryset=choices,
        error_messages={"invalid_choice": UNKNOWN_NAME.format(noun=noun)},
        help_text=f"the {noun}'s {to_field_name}; one that does not exist or that you cannot see is a 400",
    )


# The offsets time zones use (UTC-12:00 to UTC+14:00). Python takes any under a day; PostgreSQL refuses one past
# 15:59 (a 500), and SQLite's backend overflows converting year 1 or 9999 to UTC with one.
UTC_OFFSETS = (timedelta(hours=-12), timedelta(hours=14))


class MomentField(IsoDateTimeField):
    """An ISO 8601 moment, in UTC once read: one with an offset no time zone has, or beyond the calendar once in UTC,
    is a 400 naming the parameter."""

    default_error_messages = {
        "offset": "The time-zone offset must be between -12:00 and +14:00.",
        "range": "The moment is outside the years 1 to 9999 in UTC.",
    }

    def to_python(self, value: Any) -> datetime | None:
        moment = super().to_python(value)
        if moment is None:
            return None
        if not UTC_OFFSETS[0] <= moment.utcoffset() <= UTC_OFFSETS[1]:
            raise forms.ValidationError(self.error_messages["offset"], code="offset")
        try:
            return moment.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError(self.error_messages["range"], code="range") from None


class MomentFilter(django_filters.IsoDateTimeFilter):
    """`?submitted_after=2026-01-01T00:00:00+02:00`: every date-time filter of the API."""

    field_class = MomentField


# The largest id a 64-bit key holds. A larger number in a filter reached the database and failed there (SQLite's
# OverflowError, a 500) instead of being refused as input.
MAX_ID = 2**63 - 1


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class IdFilter(django_filters.NumberFilter):
    """Filter on a related object's id ("?experiment=12"): a whole number from 1 to MAX_ID, else a 400 naming the
    parameter. NumberFilter takes any decimal ("1.5", "-1e284")."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


class StrictOrderingFilter(OrderingFilter):
    """`?ordering=` of every list endpoint. DRF's filter drops a field it does not know and orders by the default,
    so `?ordering=nope` read as if it had worked; here it is a 400 naming `ordering` and the fields it takes."""

    def get_default_valid_fields(self, queryset: QuerySet, view: Any, context: dict | None = None) -> list:
        """A view that names no `ordering_fields` is ordered by its serializer's fields, as DRF does, but only
        those the database holds: DRF also offers fields a serializer computes (a pool's `series`), which the
        query cannot order by (a 500)."""
        return [(name, label) for name, label in super().get_default_valid_fields(queryset, view, context)
                if orderable(queryset, name)]

    def remove_invalid_fields(self, queryset: QuerySet, fields: list[str], view: Any, request: Any) -> list[str]:
        valid = [name for name, _ in self.get_valid_fields(queryset, view, {"request": request})]
        terms = [term for term in fields if term]
        unknown = [term for term in terms if term.removeprefix("-") not in valid]
        if unknown:
            raise ValidationError({self.ordering_param: [
                f"Cannot order by {unknown[0][:100]!r}: use {', '.join(valid) or 'nothing here'}, each optionally "
                "prefixed with '-' for descending order, comma-separated."]})
        return terms


def orderable(queryset: QuerySet, path: str) -> bool:
    """Whether the queryset can order by `path` ("name", "project__slug"): an annotation, or model fields followed
    through their relations."""
    if path in queryset.query.annotations:
        return True
    model = queryset.model
    for part in path.split(LOOKUP_SEP):
        if model is None:
            return False
        try:
            field = model._meta.get_field(part)
        except FieldDoesNotExist:
            return False
        model = field.related_model
    return True
