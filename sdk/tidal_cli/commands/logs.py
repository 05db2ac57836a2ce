"""`tidal logs <id>`: a replica's log tail, of the current attempt or `--attempt N`; `--follow` streams it (the
server's `follow=true`) until the replica ends, resuming each time the server pauses the stream (its last line then
gives the cursor to resume from), so nothing is printed twice or lost."""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Iterator

from tidal_cli.client import Api, ApiError, CliError
from tidal_cli.commands import add_command, job_id, job_not_found
from tidal_cli.output import emit_json

# The last line of a stream the server paused before the replica ended (jobs.logs.RESUME_PREFIX).
RESUME = re.compile(r"^# tidal: log stream paused .*; resume with cursor=(\S+)$")
MAX_WAIT = 30.0  # seconds: at most this long between two tries to resume
MAX_TRIES = 10  # tries to resume in a row that the server refuses (429) or cannot be reached
_sleep = time.sleep  # between two tries (tests replace it)


def cmd_logs(args: argparse.Namespace) -> None:
    api = Api.from_config()
    path = f"jobs/{args.id}/logs/"
    try:
        if args.follow and not args.json:
            for line in follow(api, path, replica=args.replica, attempt=args.attempt, tail=args.tail):
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


def follow(api: Api, path: str, *, replica: str | None, attempt: int | None, tail: int) -> Iterator[str]:
    """The lines of a followed log across the streams it takes: when a stream's last line gives a cursor, the next
    stream resumes from it (the server gives each line once; the cursor names the attempt). A refusal to resume
    (429: the server is busy streaming) or a server that cannot be reached (restarting) is tried again, waiting
    what the server asks or a growing while, MAX_TRIES times in a row."""
    cursor: str | None = None
    tries = 0
    while True:
        query: dict[str, str | int | None] = {"replica": replica, "follow": "true"}
        query.update({"cursor": cursor} if cursor else {"attempt": attempt, "tail": tail})
        resume = None
        given = False
        try:
            for line in api.stream_lines(path, **query):
                given, tries = True, 0
                if resume is not None:  # a line like the server's last one, in the log itself
                    yield resume.group(0)
                resume = RESUME.match(line)
                if resume is None:
                    yield line
        except CliError as error:
            if given or not _worth_another_try(error, cursor) or tries >= MAX_TRIES:
                raise  # a stream broken after some lines cannot be resumed exactly
            tries += 1
            _sleep(min(MAX_WAIT, getattr(error, "retry_after", None) or 2.0 ** tries))
            continue
        if resume is None:
            return  # the replica ended
        cursor = resume.group(1)


def _worth_another_try(error: CliError, cursor: str | None) -> bool:
    """A server busy streaming (429) is tried again, and so, once a stream ran, is one that cannot be reached."""
    if isinstance(error, ApiError):
        return error.status == 429 and (cursor is not None or error.code == "streams_busy")
    return cursor is not None and error.code in ("unreachable", "timeout")


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(sub, "logs", cmd_logs, "show a replica's log (tail, or --follow)")
    parser.add_argument("id", type=job_id, help="the job id")
    parser.add_argument("--replica", help="<role>-<index>, e.g. worker-1 (default: the first replica)")
    parser.add_argument("--attempt", type=int, help="an earlier attempt's number (default: the current or last one)")
    parser.add_argument("--tail", type=int, default=200, help="last lines to show (1-5000)")
    parser.add_argument("--follow", "-f", action="store_true",
                        help="stream new lines until the replica ends (resuming when the server pauses the stream)")
