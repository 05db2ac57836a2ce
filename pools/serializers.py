from __future__ import annotations

from dataclasses import asdict

from rest_framework import serializers

from pools import selectors


class PoolSerializer(serializers.Serializer):
    """A pool's figures (selectors.Figures): now, over 24 h, and the training on its capacity that the caller may
    see. The detail adds the 24 h samples."""

    def to_representation(self, instance):
        request = self.context["request"]
        detail = self.context.get("detail", False)
        return asdict(selectors.figures(instance, request.user, series=detail))


class DemandSerializer(serializers.Serializer):
    devices = serializers.IntegerField(min_value=0, max_value=1_000_000,
                                       help_text="Devices serving needs now (its replicas' devices).")
