"""`tidal logs <id>`: a replica's log tail; `--follow` re-reads the tail and prints what is new until the job ends."""

from __future__ import annotations

import argparse
import time

from tidal_cli.client import Api, ApiError
from tidal_cli.commands import add_command, job_id, job_not_found
from tidal_cli.output import emit_json

FINAL = {"succeeded", "failed", "cancelled"}


def new_lines(previous: list[str], current: list[str]) -> list[str]:
    """The lines of `current` after the longest suffix of `previous` it starts with (a tail window slides)."""
    for start in range(len(previous)):
        overlap = previous[start:]
        if current[:len(overlap)] == overlap:
            return current[len(overlap):]
    return current


def fetch(api: Api, args: argparse.Namespace) -> dict:
    try:
        return api.get(f"jobs/{args.id}/logs/", replica=args.replica, tail=args.tail)
    except ApiError as error:
        raise job_not_found(error, args.id) from None


def cmd_logs(args: argparse.Namespace) -> None:
    api = Api.from_config()
    body = fetch(api, args)
    if args.json:
        return emit_json(body)
    if body.get("message"):
        print(f"# {body['message']}")
    for line in body["lines"]:
        print(line)
    seen = body["lines"]
    while args.follow:
        time.sleep(args.interval)
        if api.get(f"jobs/{args.id}/")["state"] in FINAL:
            return
        current = fetch(api, args)["lines"]
        for line in new_lines(seen, current):
            print(line, flush=True)
        seen = current


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(sub, "logs", cmd_logs, "show a replica's log (tail, or --follow)")
    parser.add_argument("id", type=job_id, help="the job id")
    parser.add_argument("--replica", help="<role>-<index>, e.g. worker-1 (default: the first replica)")
    parser.add_argument("--tail", type=int, default=200, help="last lines to show (1-5000)")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing new lines until the job ends")
    parser.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
