from django import forms
from django.contrib import admin, messages

from clusters import services
from clusters.backends.kubernetes import clients, nodesync
from clusters.models import KUBERNETES_FIELDS, Cluster, FlavorRule, Node
from core.admin import InlineWrites, ModelAdmin, WritesThroughServices
from core.errors import DomainError


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

    def new_kubeconfig(self) -> str | None:
        """What to store: None keeps the stored kubeconfig, "" removes it."""
        if self.cleaned_data.get("clear_kubeconfig"):
            return ""
        text = self.cleaned_data.get("kubeconfig") or ""
        return text if text.strip() else None


def _save_node(request, node: Node) -> None:
    services.node_save(actor=request.user, node=node)


def _delete_node(request, node: Node) -> None:
    services.node_delete(actor=request.user, node=node)


def _save_rule(request, rule: FlavorRule) -> None:
    services.flavor_rule_save(actor=request.user, rule=rule)


def _delete_rule(request, rule: FlavorRule) -> None:
    services.flavor_rule_delete(actor=request.user, rule=rule)


@admin.register(Cluster)
class ClusterAdmin(WritesThroughServices, InlineWrites, ModelAdmin):
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

    inline_writes = {Node: (_save_node, _delete_node), FlavorRule: (_save_rule, _delete_rule)}

    def save_model(self, request, obj, form, change):
        services.cluster_save(actor=request.user, cluster=obj, kubeconfig=form.new_kubeconfig())

    def delete_model(self, request, obj):
        services.cluster_delete(actor=request.user, cluster=obj)

    @admin.action(description="Test connection (server version and missing permissions)")
    def test_connection(self, request, queryset):
        for cluster in queryset:
            if not cluster.is_kubernetes:
                self.message_user(request, f"{cluster.name}: simulated, nothing to connect to.", messages.INFO)
                continue
            report = clients.cluster_test_connection(cluster)
            level = messages.SUCCESS if report.ok else messages.ERROR if report.error else messages.WARNING
            self.message_user(request, f"{cluster.name}: {report.summary()}", level)

    @admin.action(description="Sync nodes now")
    def sync_nodes(self, request, queryset):
        for cluster in queryset:
            if not cluster.is_kubernetes:
                self.message_user(request, f"{cluster.name}: simulated, its nodes are edited here.", messages.INFO)
                continue
            try:
                report = nodesync.cluster_sync_nodes(cluster)
            except Exception as exc:
                self.message_user(request, f"{cluster.name}: node sync failed: {exc}", messages.ERROR)
                continue
            self.message_user(request, f"{cluster.name}: {report.summary()}", messages.SUCCESS)


@admin.register(FlavorRule)
class FlavorRuleAdmin(WritesThroughServices, ModelAdmin):
    list_display = ["pattern", "flavor", "cluster", "position"]
    list_filter = ["cluster", "flavor"]
    list_editable = ["position"]

    def save_model(self, request, obj, form, change):
        _save_rule(request, obj)

    def delete_model(self, request, obj):
        _delete_rule(request, obj)


@admin.register(Node)
class NodeAdmin(WritesThroughServices, ModelAdmin):
    list_display = ["name", "cluster", "flavor", "devices", "foreign_used", "block", "rack", "cordoned", "ready"]
    list_filter = ["cluster", "flavor", "ready", "cordoned", "block", "rack"]
    search_fields = ["name", "rack", "block"]
    list_editable = ["cordoned", "ready"]
    actions = ["mark_not_ready", "mark_ready"]

    def save_model(self, request, obj, form, change):
        _save_node(request, obj)

    def delete_model(self, request, obj):
        _delete_node(request, obj)

    @admin.action(description="Mark not ready (simulates a node failure: jobs on it fail and retry elsewhere)")
    def mark_not_ready(self, request, queryset):
        for node in queryset:
            services.node_save(actor=request.user, node=node, values={"ready": False})

    @admin.action(description="Mark ready")
    def mark_ready(self, request, queryset):
        for node in queryset:
            services.node_save(actor=request.user, node=node, values={"ready": True})
