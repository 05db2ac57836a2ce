"""costs: what the caller's projects used and spent, grouped and per period, as a table, JSON or CSV."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from tidal_cli.client import Api, UsageError
from tidal_cli.commands import add_command
from tidal_cli.csvcells import write_csv
from tidal_cli.output import emit_json, table

GROUPS = ["organization", "project", "user", "job", "experiment", "stage", "flavor", "cluster", "priority_class"]
STEPS = ["hour", "day", "week", "month"]
LABEL_PREFIX = "label:"  # a job label: label:team, label:cost-center (the server checks the key)


def group_list(value: str) -> str:
    names = [name.strip() for name in value.split(",") if name.strip()]
    names = [name if name.startswith(LABEL_PREFIX) else name.replace("-", "_") for name in names]
    unknown = [name for name in names if name not in GROUPS and not name.startswith(LABEL_PREFIX)]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown group {unknown[0]!r} (any of {', '.join(GROUPS)}, "
                                         f"or {LABEL_PREFIX}KEY for a job label)")
    if any(name == LABEL_PREFIX for name in names):
        raise argparse.ArgumentTypeError(f"{LABEL_PREFIX} needs a label key, e.g. {LABEL_PREFIX}team")
    return ",".join(names)


def money(value: float) -> str:
    return f"{value:,.2f}"


def hours(value: float) -> str:
    return f"{value:,.1f}"


def report_params(args: argparse.Namespace) -> dict:
    if args.month and (args.start or args.end):
        raise UsageError("give --month, or --start and --end, not both")
    if not args.month and bool(args.start) != bool(args.end):
        raise UsageError("a range needs both --start and --end")
    month = args.month or (None if args.start else datetime.now(UTC).strftime("%Y-%m"))
    return {"month": month, "start": args.start, "end": args.end, "group_by": args.by, "step": args.step,
            "project": args.project, "flavor": args.flavor,
            "cluster": args.cluster}


def cmd_costs(args: argparse.Namespace) -> None:
    if args.csv and args.json:
        raise UsageError("--csv prints CSV, --json the report as JSON: give one of them")
    params = report_params(args)
    api = Api.from_config()
    if args.csv:
        write_csv(api.stream_lines("costs/csv/", **params), sys.stdout)
        return
    report = api.get("costs/", **params)
    if args.json:
        return emit_json(report)
    groups = report["group_by"]
    rows = [{**row["group"], "period": row["period"], "device_hours": row["device_hours"],
             "cpu_hours": row["cpu_hours"], "memory_gib_hours": row.get("memory_gib_hours", 0.0),
             "cost": row["cost"]} for row in report["rows"]]
    columns = ([("period", "PERIOD")] if report["step"] else []) + [(name, name.upper()) for name in groups]
    columns += [("device_hours", "DEVICE-H", hours), ("cpu_hours", "CPU-H", hours),
                ("memory_gib_hours", "MEM-GIB-H", hours),
                ("cost", report["currency"], money)]
    as_of = report["as_of"].replace("T", " ").replace("Z", "").replace("+00:00", "")
    print(f"Costs {report['start']} to {report['end']} (UTC days), as of {as_of} UTC (running jobs count up to it)")
    print(table(rows, columns, empty="No usage in this range."))
    total = report["total"]
    print(f"\nTotal: {money(total['cost'])} {report['currency']}, {hours(total['device_hours'])} device-hours, "
          f"{hours(total['cpu_hours'])} CPU core-hours, {hours(total.get('memory_gib_hours', 0.0))} memory GiB-hours "
          f"({money(total.get('memory_cost', 0.0))} {report['currency']} of it memory)")
    tidal = (report.get("figures") or {}).get("tidal")
    if tidal and tidal["device_hours"]:
        print(f"On tidal capacity (lent by pools): {hours(tidal['device_hours'])} device-hours, "
              f"{money(tidal['cost'])} {report['currency']} at the tidal rate, {money(tidal['normal_cost'])} at the "
              f"normal rate: borrowing saved {money(tidal['saved'])} {report['currency']}")


def register(sub: argparse._SubParsersAction) -> None:
    costs = add_command(sub, "costs", cmd_costs, "usage and cost of your projects, grouped and per period")
    costs.add_argument("--by", type=group_list, default="project",
                       help=f"group by these, comma-separated (default project; any of {', '.join(GROUPS)}, or "
                            f"{LABEL_PREFIX}KEY for a job label, e.g. {LABEL_PREFIX}team)")
    costs.add_argument("--month", metavar="YYYY-MM", help="a calendar month (default: this month, UTC)")
    costs.add_argument("--start", metavar="YYYY-MM-DD", help="first day of a range (with --end)")
    costs.add_argument("--end", metavar="YYYY-MM-DD", help="last day of a range, included")
    costs.add_argument("--step", choices=STEPS, help="a row per hour (a range of a few days), day, week or month")
    costs.add_argument("--project", help="only this project")
    costs.add_argument("--flavor", help="only this flavor")
    costs.add_argument("--cluster", help="only this cluster")
    costs.add_argument("--csv", action="store_true", help="the rows as CSV, streamed")
