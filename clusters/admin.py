from django import forms
from django.contrib import admin, messages

from clusters import services
from clusters.models import KUBERNETES_FIELDS, Cluster, FlavorRule, Node
from core.errors import DomainError
from quotas.admin import AuditedAdmin
from tenancy.audit import audit_record


class NodeInline(admin.TabularInline):
    model = Node
    extra = 0
    fields = ["name", "flavor", "devices", "foreign_used", "block", "rack", "cordoned", "ready"]
    show_change_link = True


class FlavorRuleInline(admin.TabularInline):
    model = FlavorRule
    extra = 0
    fields = ["position", "pattern", "flavor"]


class ClusterForm(forms.ModelForm):
    """The kubeconfig is write-only: the field is always empty when shown, and left empty it keeps the stored one."""

    kubeconfig = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 6, "autocomplete": "off"}),
        help_text="Paste a kubeconfig to replace the stored one (encrypted at rest, never shown back). "
                  "Leave empty to keep the current one.")
    clear_kubeconfig = forms.BooleanField(required=False, help_text="Remove the stored kubeconfig.")

    class Meta:
        model = Cluster
        fields = ["name", "backend", "description", "enabled", *KUBERNETES_FIELDS]

    def clean_kubeconfig(self) -> str:
        text = self.cleaned_data.get("kubeconfig") or ""
        if text.strip():
            try:
                services.check_kubeconfig(text)
            except DomainError as exc:
                raise forms.ValidationError(exc.message) from None
        return text

    def save(self, commit: bool = True):
        cluster = super().save(commit=False)
        if self.cleaned_data.get("clear_kubeconfig"):
            cluster.set_kubeconfig("")
        elif (self.cleaned_data.get("kubeconfig") or "").strip():
            cluster.set_kubeconfig(self.cleaned_data["kubeconfig"])
        if commit:
            cluster.save()
            self.save_m2m()
        return cluster


@admin.register(Cluster)
class ClusterAdmin(AuditedAdmin):
    form = ClusterForm
    list_display = ["name", "backend", "enabled", "credentials", "last_sync_at", "created_at"]
    list_filter = ["backend", "enabled"]
    search_fields = ["name"]
    readonly_fields = ["credentials", "last_sync_at", "last_sync_error", "last_sync_skipped"]
    inlines = [FlavorRuleInline, NodeInline]
    actions = ["test_connection", "sync_nodes"]
    fieldsets = [
        (None, {"fields": ["name", "backend", "description", "enabled"]}),
        ("Kubernetes connection", {"fields": ["credentials", "kubeconfig", "clear_kubeconfig", "in_cluster", "qps",
                                              "burst"]}),
        ("Workloads", {"fields": ["namespace_pattern", "image_pull_secret", "termination_grace_seconds",
                                  "pending_timeout_seconds", "shm_size", "gpu_tolerations", "cluster_domain"]}),
        ("Network and topology", {"fields": ["nccl_socket_ifname", "nccl_extra_env", "rdma_resource",
                                             "topology_block_key", "topology_rack_key", "topology_switch_key"]}),
        ("Node sync", {"fields": ["last_sync_at", "last_sync_error", "last_sync_skipped"]}),
    ]

    @admin.display(description="credentials")
    def credentials(self, obj: Cluster) -> str:
        if obj.in_cluster:
            return "in-cluster service account"
        return "kubeconfig stored (encrypted)" if obj.has_kubeconfig else "none"

    def save_model(self, request, obj, form, change):
        admin.ModelAdmin.save_model(self, request, obj, form, change)
        # Like AuditedAdmin, but the audit entry never holds the kubeconfig text.
        changes = {name: "(replaced, not shown)" if name == "kubeconfig" else str(form.cleaned_data.get(name))
                   for name in form.changed_data}
        audit_record(actor=request.user, action=f"cluster.{'change' if change else 'create'}", target=obj,
                     changes=changes)

    @admin.action(description="Test connection (server version and missing permissions)")
    def test_connection(self, request, queryset):
        for cluster in queryset:
            if not cluster.is_kubernetes:
                self.message_user(request, f"{cluster.name}: simulated, nothing to connect to.", messages.INFO)
                continue
            report = services.cluster_test_connection(cluster)
            level = messages.SUCCESS if report.ok else messages.ERROR if report.error else messages.WARNING
            self.message_user(request, f"{cluster.name}: {report.summary()}", level)

    @admin.action(description="Sync nodes now")
    def sync_nodes(self, request, queryset):
        for cluster in queryset:
            if not cluster.is_kubernetes:
                self.message_user(request, f"{cluster.name}: simulated, its nodes are edited here.", messages.INFO)
                continue
            try:
                report = services.cluster_sync_nodes(cluster)
            except Exception as exc:
                self.message_user(request, f"{cluster.name}: node sync failed: {exc}", messages.ERROR)
                continue
            self.message_user(request, f"{cluster.name}: {report.summary()}", messages.SUCCESS)


@admin.register(FlavorRule)
class FlavorRuleAdmin(AuditedAdmin):
    list_display = ["pattern", "flavor", "cluster", "position"]
    list_filter = ["cluster", "flavor"]
    list_editable = ["position"]


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
