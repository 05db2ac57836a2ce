from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from core.admin import ModelAdmin
from serving.models import ScaleEvent, Service


class ScaleEventInline(admin.TabularInline):
    model = ScaleEvent
    fields = ["at", "before", "after", "reason"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0  # the autoscaler records them; nobody adds one


@admin.register(Service)
class ServiceAdmin(ModelAdmin):
    """Staff see every project's services; they are written through the API and the CLI (members of the project,
    serving.services), not here."""

    list_display = ["name", "project", "pool", "replicas", "ready_replicas", "min_replicas", "max_replicas",
                    "devices_per_replica", "metric", "target_per_replica", "metric_value", "metric_at"]
    list_filter = ["pool", "project"]
    inlines = [ScaleEventInline]

    def has_change_permission(self, request: HttpRequest, obj: Service | None = None) -> bool:
        return False  # view only: shown read-only

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Service | None = None) -> bool:
        return False
