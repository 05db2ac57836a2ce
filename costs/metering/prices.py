"""The price catalog as the pure pricing code takes it: every timeline, read in five small queries."""

from __future__ import annotations

from collections import defaultdict

from costs.metering.pricing import PriceBook
from costs.models import ClassDiscount, CpuPrice, DevicePrice, MemoryPrice, TidalRate


def _ts(row_time) -> int:
    return int(row_time.timestamp())


def price_book() -> PriceBook:
    device: dict[tuple[int, int | None], list[tuple[int, float]]] = defaultdict(list)
    for flavor, cluster, since, price in (DevicePrice.objects.order_by("effective_from")
                                          .values_list("flavor_id", "cluster_id", "effective_from",
                                                       "per_device_hour")):
        device[flavor, cluster].append((_ts(since), float(price)))
    cpu = [(_ts(since), float(price)) for since, price in
           CpuPrice.objects.order_by("effective_from").values_list("effective_from", "per_core_hour")]
    discount: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for klass, since, factor in (ClassDiscount.objects.order_by("effective_from")
                                 .values_list("priority_class_id", "effective_from", "factor")):
        discount[klass].append((_ts(since), float(factor)))
    memory: dict[tuple[int, int | None], list[tuple[int, float]]] = defaultdict(list)
    for flavor, cluster, since, price in (MemoryPrice.objects.order_by("effective_from")
                                          .values_list("flavor_id", "cluster_id", "effective_from", "per_gib_hour")):
        memory[flavor, cluster].append((_ts(since), float(price)))
    tidal = [(_ts(since), float(factor)) for since, factor in
             TidalRate.objects.order_by("effective_from").values_list("effective_from", "factor")]
    return PriceBook(device=dict(device), cpu=cpu, discount=dict(discount), memory=dict(memory), tidal=tidal)
