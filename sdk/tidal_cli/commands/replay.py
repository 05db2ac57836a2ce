"""replay: run a job trace through the scheduler on the server (platform admins), follow its progress, print
the results.

    tidal replay --trace week.csv --policy production --compare strict-fifo --wait
    tidal replay --days 7 --policy production --compare fifo-skip --wait     # the platform's own history
    tidal replay --id 12                                                     # a run started earlier
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path
from time import monotonic, sleep
from typing import Any

from tidal_cli.client import Api, ApiError, CliError, UsageError
from tidal_cli.commands import add_command, positive
from tidal_cli.humanize import duration
from tidal_cli.output import Column, emit_json, table

FINAL = {"succeeded", "failed"}


def _num(fmt: str):
    return lambda v: "-" if v is None else fmt.format(v)


SUMMARY_COLUMNS: list[Column] = [
    ("name", "POLICY"), ("jobs", "JOBS", _num("{:.0f}")), ("wait_mean", "WAIT MEAN", _num("{:.0f}")),
    ("wait_p50", "P50", _num("{:.0f}")), ("wait_p95", "P95", _num("{:.0f}")), ("wait_p99", "P99", _num("{:.0f}")),
    ("jct_mean", "JCT MEAN", _num("{:.0f}")), ("jct_p95", "JCT P95", _num("{:.0f}")),
    ("preemptions", "PREEMPT", _num("{:.0f}")), ("makespan", "MAKESPAN", _num("{:.0f}")),
    ("utilization", "UTIL", _num("{:.3f}")),
]
PROJECT_COLUMNS: list[Column] = [
    ("name", "PROJECT"), ("jobs", "JOBS", _num("{:.0f}")), ("wait_mean", "WAIT MEAN", _num("{:.0f}")),
    ("wait_p95", "P95", _num("{:.0f}")), ("jct_mean", "JCT MEAN", _num("{:.0f}")),
    ("guarantee", "GUAR", _num("{:.0f}")), ("share", "SHARE", _num("{:.3f}")),
    ("guarantee_met", "G.MET", _num("{:.3f}")), ("preemptions", "PREEMPT", _num("{:.0f}")),
]


def _bar(run: dict, started: float, width: int = 30) -> str:
    frac = float(run.get("progress") or 0.0)
    eta = run.get("eta_seconds")
    eta_text = "done" if run["status"] in FINAL else (f"ETA {duration(eta)}" if eta is not None else "ETA ?")
    return (f"\rreplay {run['id']} {run['status']:<9} [{'#' * int(width * frac):<{width}}] {frac:4.0%}  "
            f"{duration(monotonic() - started)}  {eta_text}   ")


def _follow(api: Api, run: dict, interval: float, quiet: bool) -> dict:
    started = monotonic()
    tty = sys.stderr.isatty()
    while True:
        if not quiet:
            sys.stderr.write(_bar(run, started) if tty or run["status"] in FINAL else _bar(run, started)[1:] + "\n")
            sys.stderr.flush()
        if run["status"] in FINAL:
            if not quiet and tty:
                sys.stderr.write("\n")
            return run
        sleep(interval)
        run = api.get(f"replays/{run['id']}/")


def print_results(run: dict) -> None:
    summaries = run.get("summary") or []
    print(table([{"name": s["name"], **s["overall"]} for s in summaries], SUMMARY_COLUMNS))
    for s in summaries:
        print(f"\n{s['name']}: per project")
        print(table([{"name": name, **p} for name, p in s.get("projects", {}).items()], PROJECT_COLUMNS))
    for cmp in run.get("comparison") or []:
        print(f"\n{cmp['b']} vs {cmp['a']}: mean wait per project (s)")
        rows = [{"name": name, "a": r["wait_mean"]["a"], "b": r["wait_mean"]["b"], "d": r["wait_mean"]["delta"],
                 "p95": r["wait_p95"]["delta"], "share": r["share"]["delta"], "verdict": r["verdict"]}
                for name, r in [*cmp["projects"].items(), ("ALL", cmp["overall"])]]
        print(table(rows, [("name", "PROJECT"), ("a", cmp["a"].upper(), _num("{:.0f}")),
                           ("b", cmp["b"].upper(), _num("{:.0f}")), ("d", "DELTA", _num("{:+.0f}")),
                           ("p95", "P95 DELTA", _num("{:+.0f}")), ("share", "SHARE DELTA", _num("{:+.3f}")),
                           ("verdict", "VERDICT")]))
        print(f"gain: {', '.join(cmp['gainers']) or 'nobody'}; lose: {', '.join(cmp['losers']) or 'nobody'}")
    if run.get("report_url"):
        print(f"\nreport: {run['report_url']}")


def _start(api: Api, args: argparse.Namespace) -> dict:
    data: dict[str, Any] = {"policy": args.policy, "compare": args.compare or [],
                            "skip_invalid": "true" if args.skip_invalid else "false"}
    if args.days:
        if args.cluster != "current" or args.quotas != "current":
            raise UsageError("--days replays the platform's history on its current cluster and quotas: drop "
                             "--cluster and --quotas")
        body = {**data, "source": "history", "days": args.days, "skip_invalid": args.skip_invalid}
        return api.post("replays/", body)
    with ExitStack() as stack:
        files = {}
        for field, value in (("trace", args.trace), ("cluster", args.cluster), ("quotas", args.quotas)):
            if field != "trace" and value == "current":
                data[field] = "current"
                continue
            path = Path(value)
            if not path.is_file():
                raise CliError(f"{field} file {value} not found" + ("" if field == "trace" else " (or give `current`)"),
                               code="file_not_found", fields={f"--{field}": ["file not found"]})
            files[field] = (path.name, stack.enter_context(open(path, "rb")), "text/csv")
        return api.request("POST", "replays/", data=data, files=files)


def cmd_replay(args: argparse.Namespace) -> None:
    if sum(x is not None for x in (args.trace, args.days, args.id)) != 1:
        raise UsageError("give exactly one of --trace FILE, --days N (the platform's history) or --id RUN")
    api = Api.from_config()
    try:
        run = api.get(f"replays/{args.id}/") if args.id else _start(api, args)
    except ApiError as error:
        if error.status == 403:
            raise error.reworded(f"{error} (replays are for platform admins)") from None
        if error.status == 404 and args.id:
            raise error.reworded(f"Replay {args.id} not found: it does not exist or is not yours.") from None
        raise
    if args.wait or args.id:
        run = _follow(api, run, args.interval, quiet=args.json or (args.id and not args.wait))
    if args.json:
        emit_json(run)  # the run is the answer even when it failed; the exit status still says so
    if run["status"] == "failed":
        raise CliError(f"replay {run['id']} failed: {run['message']}", code="replay_failed")
    if args.json:
        return
    if run["status"] != "succeeded":
        print(f"Started replay {run['id']} ({run['jobs']} jobs): {run['status']}. Follow it with: "
              f"tidal replay --id {run['id']} --wait")
        return
    skipped = (run.get("skipped") or {}).get("counts")
    if skipped:
        print(f"skipped {sum(skipped.values())} rows ({', '.join(f'{k}: {v}' for k, v in sorted(skipped.items()))})")
    print_results(run)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "replay", cmd_replay, "replay a job trace through the scheduler on the server (admins)",
                    "Upload a job trace (or replay the platform's last N days) and run it through the production "
                    "scheduler core in virtual time on the server, comparing policies. Platform admins only.")
    p.add_argument("--trace", help="trace CSV (replay format or a Philly CSV)")
    p.add_argument("--days", type=positive, help="instead of --trace: the platform's finished jobs of the last N days")
    p.add_argument("--id", type=positive, help="instead of starting one: show (and with --wait follow) run ID")
    p.add_argument("--cluster", default="current", help="cluster shape CSV/YAML, or `current` (default)")
    p.add_argument("--quotas", default="current", help="quota CSV/YAML, or `current` (default)")
    p.add_argument("--policy", default="production", help="production, strict-fifo, fifo-skip, sjf, pooled-fifo, "
                   "current (the server's configured policy)")
    p.add_argument("--compare", nargs="*", default=[], metavar="NAME", help="more policies to replay and compare")
    p.add_argument("--skip-invalid", action="store_true", help="skip bad trace rows and count them")
    p.add_argument("--wait", action="store_true", help="follow progress with an ETA until the run ends")
    p.add_argument("--interval", type=float, default=1.0, help=argparse.SUPPRESS)
