"""services, service: Tidal-run inference services, their replicas and why they scaled. `tidal submit` creates one
from a file with `launcher: service` (jobs.py)."""

from __future__ import annotations

import argparse

from tidal_cli.client import Api, CliError
from tidal_cli.commands import add_command, list_rows
from tidal_cli.humanize import relative
from tidal_cli.output import emit_json, fields, table

COLUMNS = [("id", "ID"), ("project", "PROJECT"), ("name", "NAME"), ("pool", "POOL"), ("state", "STATE"),
           ("ready", "READY"), ("range", "MIN..MAX"), ("devices", "DEVICES"), ("load", "METRIC / TARGET")]
UNITS = {"requests_per_second": "req/s", "gpu_duty_cycle": "% duty"}


def _row(service: dict) -> dict:
    replicas = service["replicas"]
    value = service.get("metric_value")
    unit = UNITS.get(service["metric"], service["metric"])
    shown = "-" if value is None else f"{value:g}"
    return {**service, "ready": f"{replicas['ready']}/{replicas['desired']}",
            "range": f"{replicas['min']}..{replicas['max']}",
            "load": f"{shown} / {service['target_per_replica']:g} {unit} per replica"}


def cmd_services(args: argparse.Namespace) -> None:
    rows = list_rows("services/", project=args.project, pool=args.pool)
    if args.json:
        return emit_json(rows)
    print(table([_row(s) for s in rows], COLUMNS, empty="No services in your projects."))


def find(name: str, project: str | None) -> dict:
    """The service named `name` in `project` (or in the only one of your projects that has one of that name)."""
    matches = [s for s in list_rows("services/", project=project) if s["name"] == name]
    if not matches:
        where = f" in project {project}" if project else ""
        raise CliError(f"Service {name} not found{where}: it does not exist or is not in one of your projects.",
                       code="not_found")
    if len(matches) > 1:
        raise CliError(f"Several of your projects have a service {name} ({', '.join(s['project'] for s in matches)})"
                       ": pass --project.", code="ambiguous")
    return Api.from_config().get(f"services/{matches[0]['id']}/")


def cmd_service(args: argparse.Namespace) -> None:
    service = find(args.name, args.project)
    if args.json:
        return emit_json(service)
    row = _row(service)
    slo = service.get("latency_slo_ms")
    print(fields([("service", f"{service['name']} (#{service['id']}) in project {service['project']}"),
                  ("pool", f"{service['pool']} ({service['cluster']}, {service['flavor']})"),
                  ("image", service["image"]), ("port", service["port"]), ("state", service["state"]),
                  ("replicas", f"{row['ready']} ready, {row['range']}, {service['devices_per_replica']} devices each"),
                  ("metric", row["load"]), ("autoscaler", service.get("scale_reason")),
                  ("latency SLO", slo and f"p99 {slo} ms (last {service['p99_latency_ms']})"),
                  ("last reading", relative(service.get("metric_at")) if service.get("metric_at") else "none yet")],
                 indent=""))
    print("\nScale events:")
    print(table([{**e, "when": relative(e["at"]), "change": f"{e['before']} -> {e['after']}"}
                 for e in service.get("scale_events") or []],
                [("when", "WHEN"), ("change", "REPLICAS"), ("reason", "REASON")], empty="None."))


def register(sub: argparse._SubParsersAction) -> None:
    services = add_command(sub, "services", cmd_services, "list inference services with their replicas and load",
                           "Tidal-run inference services of your projects: ready/desired replicas, their bounds, "
                           "the devices they hold in their pool and their metric against the target.")
    services.add_argument("--project", help="only this project's")
    services.add_argument("--pool", help="only those in this pool")
    service = add_command(sub, "service", cmd_service, "one service: its replicas and why it scaled")
    service.add_argument("name", help="the service's name")
    service.add_argument("--project", help="project slug (needed when several of yours have one of this name)")
