from django.contrib import admin

from core.admin import InlineWrites, WritesThroughServices
from tenancy import services
from tenancy.models import ApiToken, AuditEntry, Membership, Organization, Project


def _save_project(request, project: Project) -> None:
    """Settings through project_save; the archived box through project_archive (audited as such)."""
    archived = project.archived
    stored = Project.objects.filter(pk=project.pk).values_list("archived", flat=True).first()
    project.archived = bool(stored)
    services.project_save(actor=request.user, project=project)
    if archived != project.archived:
        services.project_archive(actor=request.user, project=project, archived=archived)


def _delete_project(request, project: Project) -> None:
    services.project_delete(actor=request.user, project=project)


class ProjectInline(admin.TabularInline):
    model = Project
    extra = 0
    fields = ["name", "slug", "archived"]
    show_change_link = True


@admin.register(Organization)
class OrganizationAdmin(InlineWrites, admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [ProjectInline]
    inline_writes = {Project: (_save_project, _delete_project)}


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(WritesThroughServices, admin.ModelAdmin):
    list_display = ["slug", "name", "organization", "archived", "max_running_jobs", "created_at"]
    list_filter = ["organization", "archived"]
    search_fields = ["slug", "name", "organization__name"]
    inlines = [MembershipInline]

    def save_model(self, request, obj, form, change):
        _save_project(request, obj)

    def delete_model(self, request, obj):
        _delete_project(request, obj)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role", "project__organization", "project"]
    search_fields = ["user__username", "user__email", "project__slug"]
    autocomplete_fields = ["user", "project"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens without their secret: only the prefix is shown, and nothing about them can be edited but revocation."""

    list_display = ["name", "user", "prefix", "read_only", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = ["read_only", "revoked_at", "expires_at"]
    search_fields = ["name", "user__username", "prefix"]
    exclude = ["digest"]
    readonly_fields = ["user", "name", "prefix", "read_only", "created_at", "expires_at", "last_used_at"]

    def has_add_permission(self, request):
        return False  # a token's secret must be shown to its owner once; create tokens in the UI or API


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "actor_name", "action", "target_repr", "project"]
    list_filter = ["action", "project"]
    search_fields = ["actor_name", "action", "target_repr", "target_id"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
