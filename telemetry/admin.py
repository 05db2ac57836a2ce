from django import forms
from django.contrib import admin
from django.http import HttpRequest

from core.admin import ModelAdmin, WritesThroughServices
from telemetry import services
from telemetry.models import TelemetrySource


@admin.register(TelemetrySource)
class TelemetrySourceAdmin(WritesThroughServices, ModelAdmin):
    """Where each cluster's GPU telemetry is read: the exporter's labels, the matchers, how far it was read."""

    list_display = ["cluster", "enabled", "pod_label", "node_label", "gpu_label", "selector", "read_through",
                    "last_error"]
    readonly_fields = ["read_through", "last_read_at", "last_error"]

    def save_model(self, request: HttpRequest, obj: TelemetrySource, form: forms.ModelForm, change: bool) -> None:
        services.source_save(actor=request.user, source=obj)

    def delete_model(self, request: HttpRequest, obj: TelemetrySource) -> None:
        services.source_delete(actor=request.user, source=obj)
