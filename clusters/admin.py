from django.contrib import admin

from clusters.models import Cluster, Node
from quotas.admin import AuditedAdmin


class NodeInline(admin.TabularInline):
    model = Node
    extra = 0
    fields = ["name", "flavor", "devices", "foreign_used", "block", "rack", "cordoned", "ready"]
    show_change_link = True


@admin.register(Cluster)
class ClusterAdmin(AuditedAdmin):
    list_display = ["name", "backend", "enabled", "created_at"]
    list_filter = ["backend", "enabled"]
    search_fields = ["name"]
    inlines = [NodeInline]


@admin.register(Node)
class NodeAdmin(AuditedAdmin):
    list_display = ["name", "cluster", "flavor", "devices", "foreign_used", "block", "rack", "cordoned", "ready"]
    list_filter = ["cluster", "flavor", "ready", "cordoned", "block", "rack"]
    search_fields = ["name", "rack", "block"]
    list_editable = ["cordoned", "ready"]
    actions = ["mark_not_ready", "mark_ready"]

    @admin.action(description="Mark not ready (simulates a node failure: jobs on it fail and retry elsewhere)")
    def mark_not_ready(self, request, queryset):
        queryset.update(ready=False)

    @admin.action(description="Mark ready")
    def mark_ready(self, request, queryset):
        queryset.update(ready=True)
