"""The cluster page: per cluster, a node x device occupancy grid coloured by project.

Inventory is not tenant data (every user sees the nodes); occupancy is: `clusters.selectors.occupancy_by_node`
names only the caller's projects and shows everyone else's devices as "other".
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from clusters import selectors
from tenancy.selectors import projects_for_user

# CSS classes of the palette (static/css/tidal.css: distinct, readable on white, and not grey, which means "other
# tenants"): a class, not a style attribute, which the Content-Security-Policy refuses.
PALETTE = [f"pc-{slot}" for slot in range(10)]


def _preferred(slug: str) -> int:
    return zlib.crc32(slug.encode()) % len(PALETTE)


def project_colours(slugs) -> dict[str, str]:
    """A colour (its palette class) per project slug, stable across pages, restarts and processes (crc32, not hash()).

    Each slug starts from its preferred palette slot; slugs are taken in sorted order and a taken slot moves on to the
    next free one, so the caller's projects (up to the palette's size) never share a colour. Pass the same set of
    slugs (all the caller's projects, not only those on screen) to keep colours from changing as jobs come and go.
    """
    colours: dict[str, str] = {}
    taken: set[int] = set()
    for slug in sorted(set(slugs) - {"other"}):
        slot = _preferred(slug)
        for step in range(len(PALETTE)):
            if (slot + step) % len(PALETTE) not in taken:
                slot = (slot + step) % len(PALETTE)
                break
        taken.add(slot)
        colours[slug] = PALETTE[slot]
    return colours


@dataclass
class Cell:
    kind: str  # "project", "other", "external", "free"
    colour: str = ""  # a project's palette class
    title: str = ""
    job: int | None = None


@dataclass
class NodeRow:
    node: object
    cells: list[Cell]
    used: int
    status: str  # "", "cordoned", "not ready", "quarantined", or several of them ("cordoned, not ready")


@dataclass
class ClusterView:
    cluster: object
    rows: list[NodeRow] = field(default_factory=list)
    devices: int = 0
    used: int = 0
    unavailable: int = 0  # devices on cordoned or not-ready nodes

    @property
    def free(self) -> int:
        return max(0, self.devices - self.used - self.unavailable)


def node_cells(node, allocations: list[dict], colours: dict[str, str]) -> tuple[list[Cell], int]:
    """One cell per device: the project using it, foreign pods, or free. Over-reported usage is cut at capacity."""
    cells: list[Cell] = []
    for a in sorted(allocations, key=lambda a: (a["project"] == "other", a["project"], a["job"] or 0)):
        slug = a["project"]
        if slug == "other":
            cell = Cell("other", "", "another tenant's job")
        else:
            colour = colours.get(slug) or PALETTE[_preferred(slug)]
            cell = Cell("project", colour, f"{slug} · job #{a['job']}", a["job"])
        cells.extend(Cell(cell.kind, cell.colour, cell.title, cell.job) for _ in range(a["devices"]))
    used = min(len(cells), node.devices)
    cells = cells[:node.devices]
    external = min(node.foreign_used, node.devices - len(cells))
    cells.extend(Cell("external", "", "used by pods the platform did not create") for _ in range(external))
    serving = min(node.serving_used, node.devices - len(cells))
    cells.extend(Cell("external", "", "used by Tidal's inference services") for _ in range(serving))
    external += serving
    cells.extend(Cell("free", "", "free") for _ in range(node.devices - len(cells)))
    return cells, used + external


def _status(node) -> str:
    parts = []
    if node.cordoned:
        parts.append("cordoned")
    if not node.ready:
        parts.append("not ready")
    if node.quarantined_at:
        parts.append("quarantined")
    return ", ".join(parts)


@login_required
def cluster_list(request: HttpRequest) -> HttpResponse:
    occupancy = selectors.occupancy_by_node(request.user)
    mine = list(projects_for_user(request.user).values_list("slug", flat=True))
    colours = project_colours([*mine, *(a["project"] for rows in occupancy.values() for a in rows)])
    views: dict[int, ClusterView] = {c.pk: ClusterView(c) for c in selectors.clusters()}
    on_screen: set[str] = set()
    for node in selectors.nodes().order_by("cluster__name", "position", "name"):
        allocations = occupancy.get((node.cluster_id, node.name), [])
        on_screen.update(a["project"] for a in allocations if a["project"] != "other")
        cells, used = node_cells(node, allocations, colours)
        view = views.setdefault(node.cluster_id, ClusterView(node.cluster))
        status = _status(node)
        view.rows.append(NodeRow(node, cells, used, status))
        view.devices += node.devices
        view.used += used
        if status:
            view.unavailable += node.devices - used
    current = getattr(request, "project", None)
    if current:
        on_screen.add(current.slug)
    return render(request, "clusters/cluster_list.html", {
        "clusters": list(views.values()),
        "legend": [(slug, colours[slug]) for slug in sorted(on_screen)],
        "current_slug": current.slug if current else "",
    })
