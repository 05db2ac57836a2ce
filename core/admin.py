"""What every admin console page that writes shares: its writes go through the app's services."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import widgets
from django.contrib.admin.views.main import ERROR_FLAG
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db.models import ForeignKey, ManyToManyField, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from core.errors import DomainError

# The mixins' host, for mypy: without Django's stubs `ModelAdmin` is an unknown (Any) base, so `super()`'s views and
# `message_user` are found on it. At run time they are plain mixins, listed before `ModelAdmin` below.
if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin as _ModelAdmin
else:
    _ModelAdmin = object


def _holds(field: ForeignKey | ManyToManyField, value: object) -> bool:
    """Whether `value` can be an id of the relation's target: its type and its column's range."""
    try:
        field.target_field.clean(value, None)
    except ValidationError:
        return False
    return True


class _OnlyIds:
    """An autocomplete select showing only the values that can be ids: Django's looks its selected values up, and a
    form sent back with one that is no id (`project=abc`, refused by the form) failed to render (ValueError)."""

    field: ForeignKey | ManyToManyField

    def optgroups(self, name: str, value: list, attr: dict | None = None) -> list:
        return super().optgroups(name, [v for v in value if _holds(self.field, v)], attr)  # type: ignore[misc]


class AutocompleteSelect(_OnlyIds, widgets.AutocompleteSelect):
    pass


class AutocompleteSelectMultiple(_OnlyIds, widgets.AutocompleteSelectMultiple):
    pass


class ModelMultipleChoiceField(forms.ModelMultipleChoiceField):
    """A many-to-many choice that refuses a value no id of its target can be before looking the choices up: on
    SQLite (`make run`) an id beyond 64-bit integers reached that query (OverflowError: a 500)."""

    def clean(self, value: object) -> object:
        if isinstance(value, list | tuple):
            opts = self.queryset.model._meta
            target = opts.get_field(self.to_field_name) if self.to_field_name else opts.pk
            for one in value:
                try:
                    target.clean(one, None)
                except ValidationError:
                    raise ValidationError(self.error_messages["invalid_pk_value"], code="invalid_pk_value",
                                          params={"pk": one}) from None
        return super().clean(value)


class ModelAdmin(admin.ModelAdmin):
    """Every console page's base: a value in the address or a form that a field cannot hold is no server error.
    Django's admin takes an add page's initial values from the query string (`?project=3`) and filters a list by
    any field in it (`?cluster=3`); an initial relation that is no id (`?project=abc`) failed the page's select
    (ValueError), and on SQLite, which binds integers only up to 2^63 - 1, a larger one failed the list
    (OverflowError)."""

    def get_changeform_initial_data(self, request: HttpRequest) -> dict:
        initial = super().get_changeform_initial_data(request)
        return {name: value for name, value in initial.items() if self._relation_may_hold(name, value)}

    def formfield_for_foreignkey(self, db_field: ForeignKey, request: HttpRequest, **kwargs):
        if db_field.name in self.get_autocomplete_fields(request) and "widget" not in kwargs:
            kwargs["widget"] = AutocompleteSelect(db_field, self.admin_site, using=kwargs.get("using"))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field: ManyToManyField, request: HttpRequest, **kwargs):
        if db_field.name in self.get_autocomplete_fields(request) and "widget" not in kwargs:
            kwargs["widget"] = AutocompleteSelectMultiple(db_field, self.admin_site, using=kwargs.get("using"))
        kwargs.setdefault("form_class", ModelMultipleChoiceField)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        try:
            return super().changelist_view(request, extra_context)
        except OverflowError:  # as Django answers a filter it cannot apply: the list again, unfiltered, with a note
            return HttpResponseRedirect(f"{request.path}?{ERROR_FLAG}=1")

    def _relation_may_hold(self, name: str, value: str | list[str]) -> bool:
        try:
            field = self.opts.get_field(name)
        except FieldDoesNotExist:
            return True
        if not isinstance(field, ForeignKey | ManyToManyField):
            return True
        return all(_holds(field, one) for one in (value if isinstance(value, list) else [value]))


class WritesThroughServices(_ModelAdmin):
    """For a ModelAdmin whose `save_model` and `delete_model` call the app's service functions (which validate,
    audit and wake the scheduler, as from the API): the bulk "delete selected" action deletes one by one through
    `delete_model` instead of one SQL DELETE that would skip them. A rule a service enforces beyond the form (the
    last owner of a project, a project with jobs) is shown as an error message on the page, not a server error; the
    change page's transaction is rolled back."""

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for obj in queryset:
            self.delete_model(request, obj)

    def changeform_view(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        return self._refusal_shown(request, super().changeform_view, *args, **kwargs)

    def delete_view(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        return self._refusal_shown(request, super().delete_view, *args, **kwargs)

    def changelist_view(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        return self._refusal_shown(request, super().changelist_view, *args, **kwargs)

    def _refusal_shown(self, request: HttpRequest, view, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except DomainError as error:
            self.message_user(request, error.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


class InlineWrites(_ModelAdmin):
    """For a ModelAdmin with inlines: `inline_writes` maps an inline's model to (save, delete) functions taking
    (request, obj), so rows edited inline go through the services like the model's own page."""

    inline_writes: dict = {}

    def save_formset(self, request: HttpRequest, form, formset, change: bool) -> None:
        writes = self.inline_writes.get(formset.model)
        if writes is None:
            return super().save_formset(request, form, formset, change)
        save, delete = writes
        for obj in formset.save(commit=False):
            save(request, obj)
        for obj in formset.deleted_objects:
            delete(request, obj)
        formset.save_m2m()
