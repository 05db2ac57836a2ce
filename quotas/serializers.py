from __future__ import annotations

from rest_framework import serializers

from core.serializers import StrictModelSerializer
from quotas import selectors
from quotas.models import PriorityClass, Quota, ResourceFlavor
from tenancy.serializers import ScopedProjectField


class ResourceFlavorSerializer(StrictModelSerializer):
    class Meta:
        model = ResourceFlavor
        fields = ["id", "name", "vendor", "device_resource", "arch", "rdma", "description"]


class PriorityClassSerializer(StrictModelSerializer):
    # Declared, so without the one-default constraint's validator: making a class the default takes the default
    # from the previous one (quotas.services.priority_class_save).
    is_default = serializers.BooleanField(required=False, default=False)

    class Meta:
        model = PriorityClass
        fields = ["id", "name", "value", "preemptible", "is_default", "description"]


class QuotaSerializer(StrictModelSerializer):
    project = ScopedProjectField()
    flavor = serializers.SlugRelatedField(slug_field="name", queryset=selectors.flavors())
    used = serializers.SerializerMethodField()
    borrowed = serializers.SerializerMethodField()
    lent = serializers.SerializerMethodField()
    below_usage = serializers.SerializerMethodField(help_text="Guarantee + borrow limit is below current use: the "
                                                    "excess is reclaimed by preemption.")

    class Meta:
        model = Quota
        fields = ["id", "project", "flavor", "guaranteed", "borrow_limit", "lend_limit", "used", "borrowed", "lent",
                  "below_usage"]

    def _usage(self, quota: Quota):
        return self.context.get("usage", {}).get(quota.pk)

    def get_used(self, quota: Quota) -> int:
        usage = self._usage(quota)
        return usage.used if usage else 0

    def get_borrowed(self, quota: Quota) -> int:
        usage = self._usage(quota)
        return usage.borrowed if usage else 0

    def get_lent(self, quota: Quota) -> int:
        usage = self._usage(quota)
        return usage.lent if usage else 0

    def get_below_usage(self, quota: Quota) -> bool:
        return self.get_used(quota) > quota.guaranteed + quota.borrow_limit
