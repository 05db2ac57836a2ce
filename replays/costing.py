"""What a replay's jobs would have cost: the engine's segments (one per attempt, plain data) priced with the
platform's own pricing code, per project and in total, and the difference between two replays of a run (the
baseline and a candidate, e.g. a what-if's quota change).

A trace's times are relative (seconds from its first job), so there are no prices of their dates: every segment is
priced at the prices in force when the run is priced (`priced_at`), the baseline and the candidate alike, so their
difference is what the change would cost at today's prices. Names meet the price book through the catalog: a
flavor the platform does not know (an uploaded trace's `gpu`) has no price, and its device-hours are counted as
unpriced rather than costed at zero in silence; an unknown cluster takes the flavor's price, an unknown priority
class pays the full price."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from costs.metering.pricing import HOUR, PriceBook, Usage, value_at
from replay import Segment


@dataclass(frozen=True)
class Catalog:
    """Names as replays know them -> ids as prices are keyed."""

    flavors: Mapping[str, int]
    clusters: Mapping[str, int]
    classes: Mapping[str, int]


def _priced(book: PriceBook, usage: Usage, at: int) -> bool:
    """A device price is in force for the flavor (its own or the cluster's)."""
    return any(value_at(book.device.get(key, ()), at) is not None
               for key in ((usage.flavor_id, None), (usage.flavor_id, usage.cluster_id)))


def replay_cost(segments: Iterable[Segment], book: PriceBook, catalog: Catalog, at: datetime,
                currency: str) -> dict[str, Any]:
    """Device-hours and cost per project and in total of `segments`, each priced at the prices in force at `at`:
    `{"currency", "priced_at", "projects": {name: {"device_hours", "cost"}}, "total": {...},
    "unpriced_device_hours", "unpriced_flavors"}` (JSON-ready)."""
    moment = int(at.timestamp())
    projects: dict[str, dict[str, float]] = {}
    unpriced: dict[str, float] = {}
    for segment in segments:
        hours = segment.devices * (segment.end - segment.start) / HOUR
        row = projects.setdefault(segment.project, {"device_hours": 0.0, "cost": 0.0})
        row["device_hours"] += hours
        flavor = catalog.flavors.get(segment.flavor)
        usage = None if flavor is None else Usage(flavor, catalog.clusters.get(segment.cluster),
                                                  catalog.classes.get(segment.priority, 0), segment.devices, 0)
        if usage is None or not _priced(book, usage, moment):
            unpriced[segment.flavor] = unpriced.get(segment.flavor, 0.0) + hours
            continue
        row["cost"] += book.hourly(usage, moment) * (segment.end - segment.start) / HOUR
    total = {key: sum(row[key] for row in projects.values()) for key in ("device_hours", "cost")}
    return {"currency": currency, "priced_at": at.isoformat(), "projects": dict(sorted(projects.items())),
            "total": total, "unpriced_device_hours": sum(unpriced.values()), "unpriced_flavors": sorted(unpriced)}


def cost_difference(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    """Per project (then in total) the baseline's and the candidate's cost and device-hours, and candidate - baseline:
    `{"projects": {name: {"cost": {"a", "b", "delta"}, "device_hours": {...}}}, "total": {...}}`."""
    zero = {"device_hours": 0.0, "cost": 0.0}

    def side_by_side(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, dict[str, float]]:
        return {key: {"a": a[key], "b": b[key], "delta": b[key] - a[key]} for key in ("cost", "device_hours")}

    names = sorted(set(baseline["projects"]) | set(candidate["projects"]))
    return {"currency": baseline["currency"], "priced_at": baseline["priced_at"],
            "projects": {name: side_by_side(baseline["projects"].get(name, zero), candidate["projects"].get(name, zero))
                         for name in names},
            "total": side_by_side(baseline["total"], candidate["total"])}


def format_cost(summaries: Iterable[Mapping[str, Any]], differences: Iterable[Mapping[str, Any]]) -> str:
    """The costs as text for the run's report: per replay, then each candidate against the baseline."""
    lines = []
    for summary in summaries:
        cost = summary["cost"]
        lines.append(f"{summary['name']}: {cost['total']['cost']:,.2f} {cost['currency']} for "
                     f"{cost['total']['device_hours']:,.1f} device-hours, at the prices of {cost['priced_at'][:16]}")
        lines += [f"  {name:<24}{row['cost']:>14,.2f}{row['device_hours']:>14,.1f} device-hours"
                  for name, row in cost["projects"].items()]
        if cost["unpriced_device_hours"]:
            lines.append(f"  unpriced: {cost['unpriced_device_hours']:,.1f} device-hours of "
                         f"{', '.join(cost['unpriced_flavors'])} (no price)")
    for difference in differences:
        lines.append(f"\n{difference['a']} -> {difference['b']}, cost per project ({difference['cost']['currency']})")
        rows = [*difference["cost"]["projects"].items(), ("ALL", difference["cost"]["total"])]
        lines += [f"  {name:<24}{row['cost']['a']:>14,.2f}{row['cost']['b']:>14,.2f}{row['cost']['delta']:>+14,.2f}"
                  for name, row in rows]
    return "\n".join(lines)
