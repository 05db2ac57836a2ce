"""The admin console: staff's failure patterns (validated as the API does: a bad regular expression is an error on
its field), the diagnoses (read-only), and the quarantined nodes with a release action."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages

from core.admin import ModelAdmin, WritesThroughServices
from core.errors import DomainError
from reliability import services
from reliability.models import Diagnosis, FailurePattern, ProjectPolicy, QuarantinedNode


class FailurePatternForm(forms.ModelForm):
    class Meta:
        model = FailurePattern
        fields = ["pattern", "source", "cause", "confidence", "action", "quarantine", "context", "description",
                  "enabled"]

    def clean(self) -> dict:
        data = super().clean()
        if not self.errors:
            try:
                services.pattern_values(data)
            except DomainError as error:
                self.add_error(error.field if error.field in self.fields else None, error.message)
        return data


@admin.register(FailurePattern)
class FailurePatternAdmin(WritesThroughServices, ModelAdmin):
    form = FailurePatternForm
    list_display = ["pattern", "source", "cause", "confidence", "action", "enabled", "created_by"]
    list_filter = ["source", "cause", "enabled"]

    def save_model(self, request, obj: FailurePattern, form, change: bool) -> None:
        data = {name: form.cleaned_data[name] for name in form.Meta.fields}
        if change:
            services.pattern_update(FailurePattern.objects.get(pk=obj.pk), actor=request.user, data=data)
        else:
            obj.pk = services.pattern_create(actor=request.user, data=data).pk

    def delete_model(self, request, obj: FailurePattern) -> None:
        services.pattern_delete(obj, actor=request.user)


@admin.register(Diagnosis)
class DiagnosisAdmin(ModelAdmin):
    list_display = ["attempt", "project", "cause", "confidence", "action", "cluster", "ended_at"]
    list_filter = ["cause", "kind", "outcome"]
    readonly_fields = [f.name for f in Diagnosis._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(QuarantinedNode)
class QuarantinedNodeAdmin(ModelAdmin):
    list_display = ["name", "cluster", "quarantined_at", "quarantine_reason"]
    actions = ["release"]

    def get_queryset(self, request):
        return super().get_queryset(request).filter(quarantined_at__isnull=False).select_related("cluster")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.action(description="Release the selected nodes (back in service)")
    def release(self, request, queryset) -> None:
        for node in queryset:
            try:
                services.node_release(node, actor=request.user)
            except DomainError as error:
                self.message_user(request, error.message, messages.ERROR)
        self.message_user(request, "Released: the scheduler places jobs there again.")


@admin.register(ProjectPolicy)
class ProjectPolicyAdmin(ModelAdmin):
    """A project's opt-in: restart its hung jobs from their checkpoint."""

    list_display = ["project", "restart_on_hang"]
    autocomplete_fields = ["project"]
