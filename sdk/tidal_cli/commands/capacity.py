"""queue, quota, flavors, priority-classes: where capacity goes and who waits for it."""

from __future__ import annotations

import argparse

from tidal_cli.client import Api
from tidal_cli.commands import add_command, list_rows
from tidal_cli.humanize import estimate, relative, usage_bar
from tidal_cli.output import emit_json, table, truncate


def cmd_queue(args: argparse.Namespace) -> None:
    rows = list_rows("queue/", project=args.project, flavor=args.flavor)
    if args.json:
        return emit_json(rows)
    # An elastic job's devices are its minimum need: "8 (min)".
    shown = [{**row, **{f"w_{k}": v for k, v in (row.get("waiting") or {}).items()},
              "estimate": estimate(row.get("waiting")),
              "devices": f"{row.get('total_devices')} (min)" if row.get("elastic") else row.get("total_devices")}
             for row in rows]
    print(table(shown, [
        ("flavor", "FLAVOR"), ("w_flavor_position", "POS"), ("w_project_position", "PROJ POS"), ("id", "ID"),
        ("project", "PROJECT"), ("name", "NAME", lambda v: truncate(v, 32)), ("devices", "DEVICES"),
        ("priority_class", "PRIORITY"), ("submitted_at", "WAITING", lambda v: relative(v).removesuffix(" ago")),
        ("estimate", "ETA"), ("w_reason", "REASON"),
    ], empty="The queue is empty: nothing is waiting."))


def _limit(value: int | None) -> str:
    return "all" if value is None else str(value)


def cmd_quota(args: argparse.Namespace) -> None:
    rows = list_rows("quotas/", project=args.project, flavor=args.flavor)
    if args.json:
        return emit_json(rows)
    for row in rows:
        row["bar"] = usage_bar(row["guaranteed"], row["borrow_limit"], row["used"], row["borrowed"], row["lent"])
        if row.get("below_usage"):
            row["bar"] += " over quota: excess will be reclaimed"
    print(table(rows, [
        ("project", "PROJECT"), ("flavor", "FLAVOR"), ("guaranteed", "GUARANTEED"), ("used", "USED"),
        ("borrowed", "BORROWED"), ("lent", "LENT"), ("borrow_limit", "BORROW LIMIT"),
        ("lend_limit", "LEND LIMIT", _limit), ("bar", "USAGE"),
    ], empty="No quotas" + (f" for project {args.project}" if args.project else "") + "."))
    if rows:
        print("\nUSAGE: # used  ~ lent to other projects  . free guarantee  | end of guarantee  + borrowed")


def cmd_flavors(args: argparse.Namespace) -> None:
    rows = Api.from_config().all_pages("flavors/")
    if args.json:
        return emit_json(rows)
    print(table(rows, [("name", "FLAVOR"), ("vendor", "VENDOR"), ("device_resource", "DEVICE RESOURCE"),
                       ("arch", "ARCH"), ("rdma", "RDMA"), ("description", "DESCRIPTION")]))


def cmd_priority_classes(args: argparse.Namespace) -> None:
    rows = Api.from_config().all_pages("priority-classes/")
    if args.json:
        return emit_json(rows)
    rows = sorted(rows, key=lambda r: -r["value"])
    print(table(rows, [("name", "PRIORITY CLASS"), ("value", "VALUE"), ("preemptible", "PREEMPTIBLE"),
                       ("is_default", "DEFAULT"), ("description", "DESCRIPTION")]))


def register(sub: argparse._SubParsersAction) -> None:
    queue = add_command(sub, "queue", cmd_queue, "waiting jobs: why, their positions and estimated start",
                        "Waiting jobs in scheduler order per flavor, with the reason each waits, its position in the "
                        "flavor's and the project's queue, and an estimated start.")
    queue.add_argument("--project", help="only this project")
    queue.add_argument("--flavor", help="only this flavor")
    quota = add_command(sub, "quota", cmd_quota, "quotas with live usage: guaranteed, used, borrowed, lent")
    quota.add_argument("--project", help="only this project")
    quota.add_argument("--flavor", help="only this flavor")
    add_command(sub, "flavors", cmd_flavors, "accelerator flavors jobs can ask for")
    add_command(sub, "priority-classes", cmd_priority_classes, "priority classes jobs can use")
