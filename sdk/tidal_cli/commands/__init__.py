"""One module per topic; each exposes `register(sub)` adding its subcommands. `COMMAND_MODULES` is the order of
`tidal --help`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tidal_cli.client import Api, ApiError, CliError, load_config
from tidal_cli.digits import is_digits

Handler = Callable[[argparse.Namespace], None]

STATES = ["queued", "admitted", "dispatching", "running", "succeeded", "failed", "cancelled", "preempted", "retrying"]
FINAL_STATES = {"succeeded", "failed", "cancelled"}
ACTIVE_STATES = [s for s in STATES if s not in FINAL_STATES]


def add_command(sub: argparse._SubParsersAction, name: str, handler: Handler, help_text: str,
                description: str | None = None) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=description or help_text[:1].upper() + help_text[1:])
    parser.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    parser.set_defaults(handler=handler)
    return parser


def job_id(value: str) -> int:
    """`42` or `#42`."""
    text = value.strip().lstrip("#")
    if not is_digits(text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a job id: {value!r} (a positive number, e.g. 42)")
    return int(text)


def positive(value: str) -> int:
    if not is_digits(value) or int(value) < 1:
        raise argparse.ArgumentTypeError(f"not a positive number: {value!r}")
    return int(value)


def state_list(value: str) -> list[str]:
    """`--state queued,running` or `--state queued --state running`."""
    states = [s.strip().lower() for s in value.split(",") if s.strip()]
    unknown = [s for s in states if s not in STATES]
    if unknown or not states:
        raise argparse.ArgumentTypeError(f"unknown state {', '.join(unknown) or value!r} (one of {', '.join(STATES)})")
    return states


def default_project(explicit: str | None) -> str | None:
    return explicit or load_config().get("project") or None


def job_not_found(error: ApiError, job: int) -> CliError:
    if error.status == 404:
        return error.reworded(f"Job {job} not found: it does not exist or is not in one of your projects.")
    return error


# Where to find the names a list filter accepts, added to the server's "No flavor named 'x'." (text and JSON alike).
NAME_HINTS = {"project": "`tidal projects` lists yours", "flavor": "`tidal flavors` lists them"}


def list_rows(path: str, *, limit: int | None = None, **filters: Any) -> list[dict]:
    """Every row of a list endpoint, filtered by name. The server refuses a name the caller cannot see (400 naming
    the field); the error then says where the valid names are."""
    try:
        return Api.from_config().all_pages(path, limit=limit, **filters)
    except ApiError as error:
        hints = [NAME_HINTS[field] for field in error.fields if field in NAME_HINTS]
        if error.status == 400 and hints:
            raise error.reworded(f"{error} ({'; '.join(hints)})") from None
        raise
