from django.contrib import admin, messages

from core.admin import ModelAdmin, WritesThroughServices
from pools import services
from pools.models import GiveBack, Pool, PoolToken


class PoolTokenInline(admin.TabularInline):
    model = PoolToken
    fields = ["name", "prefix", "created_at", "revoked_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False  # created by the action below: the secret is shown once


@admin.register(Pool)
class PoolAdmin(WritesThroughServices, ModelAdmin):
    list_display = ["name", "cluster", "flavor", "node_pattern", "devices", "headroom_percent", "headroom_floor",
                    "time_zone", "lending", "demand", "demand_at"]
    list_filter = ["cluster", "flavor", "lending"]
    readonly_fields = ["demand", "demand_at"]
    inlines = [PoolTokenInline]
    actions = ["create_token", "revoke_tokens"]

    def save_model(self, request, obj, form, change):
        services.pool_save(actor=request.user, pool=obj)

    def delete_model(self, request, obj):
        services.pool_delete(actor=request.user, pool=obj)

    @admin.action(description="Create a demand token (shown once)")
    def create_token(self, request, queryset):
        for pool in queryset:
            _, secret = services.token_create(actor=request.user, pool=pool, name=f"{pool.name} autoscaler")
            self.message_user(request, f"Token for {pool.name} (copy it now, it is not shown again): {secret}",
                              messages.WARNING)

    @admin.action(description="Revoke the selected pools' demand tokens")
    def revoke_tokens(self, request, queryset):
        for pool in queryset:
            for token in pool.tokens.filter(revoked_at=None):
                services.token_revoke(actor=request.user, token=token)


@admin.register(GiveBack)
class GiveBackAdmin(ModelAdmin):
    list_display = ["pool", "started_at", "freed_at", "devices"]
    list_filter = ["pool"]
    readonly_fields = list_display

    def has_add_permission(self, request):
        return False  # the scheduler records give-backs; nobody edits them

    def has_delete_permission(self, request, obj=None):
        return False
