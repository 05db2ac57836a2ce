from django.contrib import admin

from core.admin import ModelAdmin
from jobs.models import Attempt, Job, JobEvent, ReplicaGroup


class ReplicaGroupInline(admin.TabularInline):
    model = ReplicaGroup
    extra = 0
    can_delete = False
    readonly_fields = ["role", "replicas", "min_replicas", "devices", "flavor", "cpu_millis", "memory_mib", "rdma"]


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    fields = readonly_fields = ["number", "cluster", "placement", "admitted_at", "started_at", "ended_at", "outcome",
                                "cause", "reason", "checkpoint"]


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    readonly_fields = ["created_at", "attempt", "kind", "from_state", "to_state", "reason", "actor_name", "details"]


@admin.register(Job)
class JobAdmin(ModelAdmin):
    """Read-only: jobs change state only through the scheduler and services, never by hand."""

    list_display = ["id", "name", "project", "state", "priority_class", "flavor", "total_devices", "submitter_name",
                    "submitted_at"]
    list_filter = ["state", "project", "flavor", "priority_class", "stage", "launcher"]
    search_fields = ["name", "submitter_name", "project__slug"]
    date_hierarchy = "submitted_at"
    inlines = [ReplicaGroupInline, AttemptInline, JobEventInline]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
