"""Cluster shapes and quota sets for replay, read from CSV or YAML files.

Cluster CSV columns: `name, flavor, devices, count, rack, block, cluster` (only flavor and devices required;
`count` repeats the row, names generated when blank). YAML: `nodes: [{flavor, devices, count, rack, ...}]`.

Quota CSV columns: `project, flavor, guaranteed, borrow_limit, lend_limit, cohort, max_running_jobs`
(project, flavor, guaranteed required). YAML: `quotas: [{project, flavor, guaranteed, ...}]`. A project
without a cohort joins the cohort "default", so every project may borrow from every other by default.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from jobs.scheduling.model import Node, Project, Quota
from replay.trace import FlavorLimits


class ConfigError(ValueError):
    """A bad cluster or quota file, naming the file and the entry."""


@dataclass(frozen=True)
class ClusterShape:
    nodes: tuple[Node, ...]

    def limits(self) -> FlavorLimits:
        node_devices: dict[str, int] = {}
        total: dict[str, int] = {}
        for n in self.nodes:
            node_devices[n.flavor] = max(node_devices.get(n.flavor, 0), n.devices)
            total[n.flavor] = total.get(n.flavor, 0) + n.devices
        return FlavorLimits(node_devices, total)

    @property
    def total_devices(self) -> int:
        return sum(n.devices for n in self.nodes)

    def devices_by_flavor(self) -> dict[str, int]:
        return self.limits().total_devices


@dataclass(frozen=True)
class QuotaSet:
    quotas: tuple[Quota, ...]
    projects: tuple[Project, ...]

    def guarantee(self, project: str) -> int:
        return sum(q.guaranteed for q in self.quotas if q.project == project)


def uniform_cluster(nodes: int, devices: int = 8, flavor: str = "gpu", *, prefix: str = "node") -> ClusterShape:
    """`nodes` identical nodes; handy for tests and the Philly scenarios."""
    width = max(3, len(str(nodes - 1)))
    return ClusterShape(tuple(Node(f"{prefix}-{i:0{width}d}", flavor, devices, devices) for i in range(nodes)))


def _int(value: object, what: str, src: str) -> int:
    try:
        x = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{src}: {what} must be a whole number, got {value!r}") from None
    if x < 0:
        raise ConfigError(f"{src}: {what} must not be negative, got {x}")
    return x


def _entries(path: Path, key: str) -> list[tuple[str, dict]]:
    """(where, mapping) for each entry of a CSV or YAML file, `where` naming the line or index."""
    if path.suffix.lower() in (".yaml", ".yml"):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        items = data.get(key) if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise ConfigError(f"{path}: expected a list under {key!r}")
        return [(f"{path} {key}[{i}]", dict(item)) for i, item in enumerate(items)]
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(line for line in f if not line.lstrip().startswith("#"))
        out = []
        for row in reader:
            # After the comment filter DictReader counts data lines only; still stable for a person to find.
            out.append((f"{path} row {reader.line_num}", {k.strip(): (v or "").strip() for k, v in row.items()}))
        return out


def nodes_from_entries(entries: Iterable[tuple[str, dict]]) -> ClusterShape:
    nodes: list[Node] = []
    names: set[str] = set()
    for where, e in entries:
        flavor = str(e.get("flavor") or "").strip()
        if not flavor:
            raise ConfigError(f"{where}: missing flavor")
        devices = _int(e.get("devices", ""), "devices", where)
        count = _int(e.get("count") or 1, "count", where)
        for i in range(count):
            name = str(e.get("name") or "").strip()
            name = f"{name}-{i}" if name and count > 1 else name or f"{flavor}-{len(nodes):04d}"
            if name in names:
                raise ConfigError(f"{where}: duplicate node name {name!r}")
            names.add(name)
            nodes.append(
                Node(
                    name=name,
                    flavor=flavor,
                    devices=devices,
                    free=devices,
                    cluster=str(e.get("cluster") or "default"),
                    block=str(e.get("block") or ""),
                    rack=str(e.get("rack") or ""),
                )
            )
    if not nodes:
        raise ConfigError("cluster has no nodes")
    return ClusterShape(tuple(nodes))


def load_cluster(path: str | Path) -> ClusterShape:
    """Read a cluster shape file (CSV or YAML, see the module docstring)."""
    return nodes_from_entries(_entries(Path(path), "nodes"))


def quotas_from_entries(entries: Iterable[tuple[str, dict]]) -> QuotaSet:
    quotas: list[Quota] = []
    projects: dict[str, Project] = {}
    for where, e in entries:
        project = str(e.get("project") or "").strip()
        flavor = str(e.get("flavor") or "").strip()
        if not project or not flavor:
            raise ConfigError(f"{where}: project and flavor are required")
        lend = e.get("lend_limit")
        quotas.append(
            Quota(
                project=project,
                flavor=flavor,
                guaranteed=_int(e.get("guaranteed", ""), "guaranteed", where),
                borrow_limit=_int(e.get("borrow_limit") or 0, "borrow_limit", where),
                lend_limit=None if lend in (None, "") else _int(lend, "lend_limit", where),
            )
        )
        mrj = e.get("max_running_jobs")
        projects.setdefault(
            project,
            Project(
                project,
                cohort=str(e.get("cohort") or "default"),
                max_running_jobs=None if mrj in (None, "") else _int(mrj, "max_running_jobs", where),
            ),
        )
    return QuotaSet(tuple(quotas), tuple(projects.values()))


def load_quotas(path: str | Path) -> QuotaSet:
    """Read a quota file (CSV or YAML, see the module docstring)."""
    return quotas_from_entries(_entries(Path(path), "quotas"))


def write_cluster(shape: ClusterShape, path: str | Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["name", "flavor", "devices", "rack", "block", "cluster"])
        for n in shape.nodes:
            w.writerow([n.name, n.flavor, n.devices, n.rack, n.block, n.cluster])


def write_quotas(qs: QuotaSet, path: str | Path) -> None:
    cohorts = {p.name: p for p in qs.projects}
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["project", "flavor", "guaranteed", "borrow_limit", "lend_limit", "cohort", "max_running_jobs"])
        for q in qs.quotas:
            p = cohorts.get(q.project)
            w.writerow(
                [
                    q.project, q.flavor, q.guaranteed, q.borrow_limit,
                    "" if q.lend_limit is None else q.lend_limit,
                    p.cohort if p else "default",
                    "" if p is None or p.max_running_jobs is None else p.max_running_jobs,
                ]
            )  # fmt: skip
