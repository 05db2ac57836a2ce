from __future__ import annotations

from rest_framework import serializers

from clusters import services
from clusters.kube.envvars import is_reserved
from clusters.models import KUBERNETES_FIELDS, Cluster, Node
from core.errors import DomainError
from core.serializers import FreeFormJSON, StrictModelSerializer


class ClusterSerializer(StrictModelSerializer):
    """The kubeconfig is write-only: accepted on create/update, stored encrypted, never returned (only
    `has_kubeconfig` says whether one is stored). An empty string removes it. Saved by `clusters.services`."""

    kubeconfig = serializers.CharField(write_only=True, required=False, allow_blank=True, trim_whitespace=False,
                                       style={"base_template": "textarea.html"})
    has_kubeconfig = serializers.BooleanField(read_only=True)

    class Meta:
        model = Cluster
        fields = ["id", "name", "backend", "description", "enabled", "created_at", *KUBERNETES_FIELDS, "kubeconfig",
                  "has_kubeconfig", "last_sync_at", "last_sync_error", "last_sync_skipped"]
        read_only_fields = ["id", "created_at", "last_sync_at", "last_sync_error", "last_sync_skipped"]
        extra_kwargs = {"nccl_extra_env": {"validators": [FreeFormJSON()]},
                        "gpu_tolerations": {"validators": [FreeFormJSON()]}}

    def validate_kubeconfig(self, text: str) -> str:
        if text:
            try:
                services.check_kubeconfig(text)
            except DomainError as exc:
                raise serializers.ValidationError(exc.message) from None
        return text

    def validate_nccl_extra_env(self, env):
        if not isinstance(env, dict) or not all(isinstance(v, str | int | float) for v in env.values()):
            raise serializers.ValidationError("A mapping of variable names to values.")
        reserved = sorted(name for name in env if is_reserved(name))
        if reserved:
            raise serializers.ValidationError(f"Set by the platform: {', '.join(reserved)}.")
        return {str(k): str(v) for k, v in env.items()}

    def validate_gpu_tolerations(self, value):
        if not isinstance(value, list) or not all(isinstance(v, str) or (isinstance(v, dict) and v.get("key"))
                                                  for v in value):
            raise serializers.ValidationError("A list of taint keys or {key, operator, value, effect} objects.")
        return value


class NodeSerializer(StrictModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    flavor = serializers.SlugRelatedField(slug_field="name", read_only=True)
    used_by = serializers.SerializerMethodField()
    free = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = ["id", "cluster", "name", "flavor", "devices", "foreign_used", "serving_used", "free", "used_by",
                  "arch", "block", "rack", "switch", "cordoned", "ready", "quarantined_at", "quarantine_reason",
                  "taints", "updated_at"]
        read_only_fields = [f for f in fields if f not in ("cordoned", "ready")]

    def get_used_by(self, node: Node) -> list[dict]:
        return self.context.get("occupancy", {}).get((node.cluster_id, node.name), [])

    def get_free(self, node: Node) -> int:
        used = sum(entry["devices"] for entry in self.get_used_by(node))
        return max(0, node.devices - node.foreign_used - node.serving_used - used)
