"""Replay runs in the admin console, and the what-if page (linked from the admin index as "What-if analyses")."""

from __future__ import annotations

from functools import partial

from django.contrib import admin
from django.shortcuts import redirect
from django.urls import path, reverse

from core.admin import ModelAdmin
from replays import views
from replays.models import ReplayRun, WhatIf


@admin.register(ReplayRun)
class ReplayRunAdmin(ModelAdmin):
    list_display = ["id", "kind", "status", "percent", "policy", "trace_name", "jobs", "created_by_name",
                    "created_at"]
    list_filter = ["kind", "status"]
    search_fields = ["trace_name", "created_by_name", "policy"]
    change_list_template = "replays/replayrun_changelist.html"

    @admin.display(description="progress")
    def percent(self, obj: ReplayRun) -> str:
        return f"{obj.progress:.0%}"

    def has_add_permission(self, request) -> bool:
        return False  # runs are started through the API, `tidal replay` or the what-if page

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def get_urls(self):
        site = self.admin_site
        urls = [
            path("what-if/", site.admin_view(partial(views.whatif, site=site)), name="replays_whatif"),
            path("what-if/<int:pk>/", site.admin_view(partial(views.whatif_result, site=site)),
                 name="replays_whatif_result"),
            path("what-if/<int:pk>/apply/", site.admin_view(partial(views.whatif_apply, site=site)),
                 name="replays_whatif_apply"),
        ]
        return urls + super().get_urls()


@admin.register(WhatIf)
class WhatIfAdmin(ModelAdmin):
    """Only an entry on the admin index: its list is the what-if page."""

    def has_module_permission(self, request) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def changelist_view(self, request, extra_context=None):
        return redirect(reverse("admin:replays_whatif"))
