"""`tidal logs <id>`: a replica's log tail, of the current attempt or `--attempt N`; `--follow` streams it (the
server's `follow=true`) until it ends."""

from __future__ import annotations

import argparse

from tidal_cli.client import Api, ApiError
from tidal_cli.commands import add_command, job_id, job_not_found
from tidal_cli.output import emit_json


def cmd_logs(args: argparse.Namespace) -> None:
    api = Api.from_config()
    path = f"jobs/{args.id}/logs/"
    try:
        if args.follow and not args.json:
            for line in api.stream_lines(path, replica=args.replica, attempt=args.attempt, tail=args.tail,
                                         follow="true"):
                print(line, flush=True)
            return
        body = api.get(path, replica=args.replica, attempt=args.attempt, tail=args.tail)
    except ApiError as error:
        raise job_not_found(error, args.id) from None
    if args.json:
        return emit_json(body)
    if body.get("message"):
        print(f"# {body['message']}")
    for line in body["lines"]:
        print(line)


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(sub, "logs", cmd_logs, "show a replica's log (tail, or --follow)")
    parser.add_argument("id", type=job_id, help="the job id")
    parser.add_argument("--replica", help="<role>-<index>, e.g. worker-1 (default: the first replica)")
    parser.add_argument("--attempt", type=int, help="an earlier attempt's number (default: the current or last one)")
    parser.add_argument("--tail", type=int, default=200, help="last lines to show (1-5000)")
    parser.add_argument("--follow", "-f", action="store_true",
                        help="stream new lines until the replica ends (or the server's time limit)")
