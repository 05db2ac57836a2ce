from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rest_framework import serializers

from pools import selectors


class PoolJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    project = serializers.CharField()
    devices = serializers.IntegerField(help_text="Devices it holds on the pool's nodes.")
    priority_class = serializers.CharField()


class PoolSerializer(serializers.Serializer):
    """A pool's figures (selectors.Figures): now, over 24 h, and the training on its capacity that the caller may
    see (staff: all; others: their own projects' jobs). The detail adds `series` and `given_back` over its `span`."""

    name = serializers.CharField()
    cluster = serializers.CharField()
    flavor = serializers.CharField()
    capacity = serializers.IntegerField(help_text="Devices of the pool's nodes.")
    demand = serializers.IntegerField(help_text="What serving demands now (the largest source; forecast included).")
    headroom = serializers.IntegerField()
    lendable = serializers.IntegerField(help_text="What training may hold on the pool now.")
    used = serializers.IntegerField(help_text="What training holds on the pool now (every project's).")
    lending = serializers.BooleanField()
    back_at = serializers.DateTimeField(allow_null=True, help_text="When the schedule or forecast stops lending.")
    given_back_24h = serializers.IntegerField()
    give_backs_24h = serializers.IntegerField()
    give_back_p50 = serializers.FloatField(allow_null=True, help_text="Seconds, over 24 h.")
    give_back_p99 = serializers.FloatField(allow_null=True, help_text="Seconds, over 24 h.")
    lent_hours_24h = serializers.FloatField()
    used_hours_24h = serializers.FloatField()
    unmet_hours_24h = serializers.FloatField()
    jobs = PoolJobSerializer(many=True)
    saved_24h = serializers.DictField(allow_null=True, help_text="Over 24 h, every project's: the device-hours "
                                      "training held on the pool's capacity, their cost at the tidal rate, "
                                      "`normal_cost` at their priority class's rate, and `saved` (the cost reports' "
                                      "prices).")
    interferences = serializers.ListField(
        child=serializers.DictField(), help_text="Serving's p99 latency over its SLO in the last 24 h: at, nodes "
        "(empty: all), p99_ms, slo_ms, until (the nodes lend nothing until then).")
    series = serializers.ListField(child=serializers.DictField(), help_text="Detail only, over `span` (24 h unless "
                                   "asked): the minute samples (at, capacity, demand, headroom, lent, used); beyond "
                                   "720 of them, the mean of each 720th of the span.")
    given_back = serializers.ListField(child=serializers.DictField(), help_text="Detail only, over `span`: each "
                                       "give-back's start (at), the devices it took back and its seconds (null while "
                                       "under way).")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        request = self.context["request"]
        return asdict(selectors.figures(instance, request.user, series=self.context.get("detail", False),
                                        span=self.context.get("span", selectors.WINDOW)))


class DemandSerializer(serializers.Serializer):
    """Serving's demand, its latency against its SLO, or both (interference.py)."""

    devices = serializers.IntegerField(min_value=0, max_value=1_000_000, required=False,
                                       help_text="Devices serving needs now (its replicas' devices).")
    p99_latency_ms = serializers.FloatField(required=False, help_text="Serving's p99 latency now, in ms.")
    latency_slo_ms = serializers.FloatField(required=False, help_text="Serving's p99 latency target, in ms: over "
                                            "it, the nodes lend nothing for the pool's cool-down.")
    nodes = serializers.ListField(child=serializers.CharField(), required=False, allow_empty=False,
                                  help_text="The pool's nodes the latency was measured on (default: all of them).")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        latency = {k for k in ("p99_latency_ms", "latency_slo_ms") if k in attrs}
        if len(latency) == 1:
            missing = ({"p99_latency_ms", "latency_slo_ms"} - latency).pop()
            raise serializers.ValidationError({missing: "Give the p99 latency and the SLO together."})
        if not latency and "nodes" in attrs:
            raise serializers.ValidationError({"p99_latency_ms": "Nodes go with a latency report."})
        if not latency and "devices" not in attrs:
            raise serializers.ValidationError({"devices": "Give the devices serving needs, or its latency."})
        return attrs
