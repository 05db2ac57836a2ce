from django.contrib import admin

from core.admin import ModelAdmin, WritesThroughServices
from quotas import selectors, services
from quotas.models import PriorityClass, ProjectUsage, Quota, ResourceFlavor


@admin.register(ResourceFlavor)
class ResourceFlavorAdmin(WritesThroughServices, ModelAdmin):
    list_display = ["name", "vendor", "device_resource", "arch", "rdma"]
    list_filter = ["vendor", "arch", "rdma"]
    search_fields = ["name", "device_resource"]

    def save_model(self, request, obj, form, change):
        services.flavor_save(actor=request.user, flavor=obj)

    def delete_model(self, request, obj):
        services.flavor_delete(actor=request.user, flavor=obj)


@admin.register(PriorityClass)
class PriorityClassAdmin(WritesThroughServices, ModelAdmin):
    list_display = ["name", "value", "preemptible", "is_default"]

    def save_model(self, request, obj, form, change):
        services.priority_class_save(actor=request.user, priority_class=obj)

    def delete_model(self, request, obj):
        services.priority_class_delete(actor=request.user, priority_class=obj)


@admin.register(Quota)
class QuotaAdmin(WritesThroughServices, ModelAdmin):
    list_display = ["project", "flavor", "guaranteed", "borrow_limit", "lend_limit", "used_now", "borrowed_now",
                    "lent_now"]
    list_filter = ["flavor", "project__organization"]
    search_fields = ["project__slug", "flavor__name"]
    list_select_related = ["project__organization", "flavor"]

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        self._usage = selectors.live_usage(list(changelist.result_list))
        return changelist

    def _live(self, obj):
        usage = getattr(self, "_usage", {}).get(obj.pk)
        return usage or selectors.live_usage([obj])[obj.pk]

    @admin.display(description="used")
    def used_now(self, obj):
        usage = self._live(obj)
        marker = " ⚠ above guarantee + borrow limit: will be reclaimed" if \
            usage.used > obj.guaranteed + obj.borrow_limit else ""
        return f"{usage.used}{marker}"

    @admin.display(description="borrowed")
    def borrowed_now(self, obj):
        return self._live(obj).borrowed

    @admin.display(description="lent")
    def lent_now(self, obj):
        return self._live(obj).lent

    def save_model(self, request, obj, form, change):
        services.quota_save(actor=request.user, quota=obj)

    def delete_model(self, request, obj):
        services.quota_delete(actor=request.user, quota=obj)


@admin.register(ProjectUsage)
class ProjectUsageAdmin(ModelAdmin):
    """Read-only: the scheduler keeps a project's past use (its add page saved a row without its time: a 500)."""

    list_display = ["project", "decayed_device_seconds", "updated_at"]
    readonly_fields = ["project", "decayed_device_seconds", "updated_at"]

    def has_add_permission(self, request) -> bool:
        return False
