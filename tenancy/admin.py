from django import forms
from django.contrib import admin, messages
from django.contrib.auth import admin as auth_admin
from django.contrib.auth.models import Group, User

from core.admin import InlineWrites, ModelAdmin, WritesThroughServices
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


def _save_membership(request, membership: Membership) -> None:
    services.membership_save(actor=request.user, membership=membership)


def _remove_membership(request, membership: Membership) -> None:
    services.membership_remove(actor=request.user, membership=membership)


class ProjectInline(admin.TabularInline):
    model = Project
    extra = 0
    fields = ["name", "slug", "archived"]
    show_change_link = True


@admin.register(Organization)
class OrganizationAdmin(WritesThroughServices, InlineWrites, ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [ProjectInline]
    inline_writes = {Project: (_save_project, _delete_project)}

    def save_model(self, request, obj, form, change):
        services.organization_save(actor=request.user, organization=obj)

    def delete_model(self, request, obj):
        services.organization_delete(actor=request.user, organization=obj)


class MembershipInlineForm(forms.ModelForm):
    """A member's user is fixed once added (another user is another membership): only the role changes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            self.fields["user"].disabled = True


class MembershipInline(admin.TabularInline):
    model = Membership
    form = MembershipInlineForm
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(WritesThroughServices, InlineWrites, ModelAdmin):
    list_display = ["slug", "name", "organization", "archived", "max_running_jobs", "elastic_jobs", "created_at"]
    list_filter = ["organization", "archived"]
    search_fields = ["slug", "name", "organization__name"]
    inlines = [MembershipInline]
    inline_writes = {Membership: (_save_membership, _remove_membership)}

    def save_model(self, request, obj, form, change):
        _save_project(request, obj)

    def delete_model(self, request, obj):
        _delete_project(request, obj)


@admin.register(Membership)
class MembershipAdmin(WritesThroughServices, ModelAdmin):
    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role", "project__organization", "project"]
    search_fields = ["user__username", "user__email", "project__slug"]
    autocomplete_fields = ["user", "project"]

    def get_readonly_fields(self, request, obj=None):
        return ["project", "user"] if obj is not None else []  # another project or user is another membership

    def save_model(self, request, obj, form, change):
        _save_membership(request, obj)

    def delete_model(self, request, obj):
        _remove_membership(request, obj)


@admin.register(ApiToken)
class ApiTokenAdmin(WritesThroughServices, ModelAdmin):
    """Tokens without their secret: only the prefix is shown. Nothing about them can be edited; the "revoke" action
    revokes them (audited, as from the UI or API)."""

    list_display = ["name", "user", "prefix", "read_only", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = ["read_only", "revoked_at", "expires_at"]
    search_fields = ["name", "user__username", "prefix"]
    exclude = ["digest"]
    readonly_fields = ["user", "name", "prefix", "read_only", "created_at", "expires_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False  # a token's secret must be shown to its owner once; create tokens in the UI or API

    def has_change_permission(self, request, obj=None):
        return False  # view only; revocation is an action

    def delete_model(self, request, obj):
        services.token_delete(actor=request.user, token=obj)

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for token in queryset:
            services.token_revoke(actor=request.user, token=token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).", messages.SUCCESS)


@admin.register(AuditEntry)
class AuditEntryAdmin(ModelAdmin):
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


# Django's own pages for accounts and groups, on the console's base (core.admin.ModelAdmin): what it answers to odd
# values in addresses and forms holds for them too.
admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class UserAdmin(ModelAdmin, auth_admin.UserAdmin):
    pass


@admin.register(Group)
class GroupAdmin(ModelAdmin, auth_admin.GroupAdmin):
    pass
