"""reliability: the failures of the caller's projects by cause and project, the mean time to recovery, and the
GPU-hours and money failures lost (the work since each failed attempt's last checkpoint)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from tidal_cli.client import Api, UsageError
from tidal_cli.commands import add_command, positive
from tidal_cli.output import emit_json, table


def money(value: float) -> str:
    return f"{value:,.2f}"


def hours(value: float) -> str:
    return f"{value:,.1f}"


def day(moment: str) -> str:
    return moment[:10]


def cmd_reliability(args: argparse.Namespace) -> None:
    if args.days is not None and args.since:
        raise UsageError("give --days, or --since (and --until), not both")
    params: dict[str, object] = {"project": args.project, "since": args.since, "until": args.until}
    if args.days is not None:  # the server takes times, not spans
        params["since"] = (datetime.now(UTC) - timedelta(days=args.days)).isoformat()
    report = Api.from_config().get("reliability/", **params)
    if args.json:
        return emit_json(report)
    currency = report["currency"]
    mttr = "" if report["mttr_seconds"] is None else \
        f", mean time to recovery {report['mttr_seconds'] / 60:.1f} min ({report['recoveries']} recovered)"
    print(f"Failures {day(report['since'])} to {day(report['until'])} (UTC): {report['failures']} failed or lost "
          f"attempts{mttr}")
    print(f"Lost to failures: {hours(report['gpu_hours_lost'])} GPU-hours, {money(report['money_lost'])} {currency}")
    print()
    print(table(report["by_class"], [("cause", "CAUSE"), ("failures", "FAILURES")], empty="No failures."))
    if report["by_project"]:
        print()
        print(table(report["by_project"], [("name", "PROJECT"), ("failures", "FAILURES"),
                                           ("gpu_hours_lost", "GPU-H LOST", hours),
                                           ("money_lost", f"{currency} LOST", money)]))


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(sub, "reliability", cmd_reliability,
                         "failures of your projects by cause and project, and the GPU-hours and money they lost")
    parser.add_argument("--days", type=positive, help="the last N days (default 28)")
    parser.add_argument("--since", metavar="TIME", help="from this ISO time (UTC unless it says)")
    parser.add_argument("--until", metavar="TIME", help="up to this ISO time (default now)")
    parser.add_argument("--project", help="only this project")
