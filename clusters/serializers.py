from __future__ import annotations

from rest_framework import serializers

from clusters.models import Cluster, Node
from mlplatform.serializers import StrictModelSerializer


class ClusterSerializer(StrictModelSerializer):
    class Meta:
        model = Cluster
        fields = ["id", "name", "backend", "description", "enabled", "created_at"]
        read_only_fields = ["id", "created_at"]


class NodeSerializer(StrictModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    flavor = serializers.SlugRelatedField(slug_field="name", read_only=True)
    used_by = serializers.SerializerMethodField()
    free = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = ["id", "cluster", "name", "flavor", "devices", "foreign_used", "free", "used_by", "arch", "block",
                  "rack", "switch", "cordoned", "ready", "taints", "updated_at"]
        read_only_fields = [f for f in fields if f not in ("cordoned", "ready")]

    def get_used_by(self, node: Node) -> list[dict]:
        return self.context.get("occupancy", {}).get((node.cluster_id, node.name), [])

    def get_free(self, node: Node) -> int:
        used = sum(entry["devices"] for entry in self.get_used_by(node))
        return max(0, node.devices - node.foreign_used - used)
