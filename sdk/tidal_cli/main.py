"""tidal: log in, look at projects and quotas, submit and follow jobs, look at tracked runs. `tidal --help` lists the
commands."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import NoReturn

from tidal_cli.client import Api, CliError, UsageError
from tidal_cli.commands import (
    account,
    budget,
    capacity,
    costs,
    jobs,
    logs,
    pools,
    reliability,
    replay,
    services,
    tracking,
)

EPILOG = """configuration: ~/.config/tidal/config.json (written by `tidal login`; TIDAL_CONFIG moves it);
TIDAL_URL, TIDAL_TOKEN and TIDAL_PROJECT override it. Every command exits 0 on success, 1 on an error
(with a one-line message on stderr) and 2 on a usage error. With --json an error is one JSON object on stderr:
{"error": {"code", "message", "fields", "status"}}."""


class ArgumentUsageError(UsageError):
    """argparse's own complaint, shown the way argparse shows it (usage line, then `tidal CMD: error: ...`)."""

    def __init__(self, message: str, *, usage: str, prog: str):
        super().__init__(message, fields=_argument_fields(message))
        self.usage = usage
        self.prog = prog

    def text(self) -> str:
        return f"{self.usage}{self.prog}: error: {self}"


def _argument_fields(message: str) -> dict[str, list[str]]:
    """The argument argparse names, as a field: `argument --limit: not a positive number` -> {"--limit": [...]}."""
    named = re.match(r"argument (\S+): (.+)$", message, re.DOTALL)
    if named:
        return {named.group(1): [named.group(2)]}
    required = re.match(r"the following arguments are required: (.+)$", message)
    if required:
        return {name: ["required"] for name in required.group(1).split(", ")}
    return {}


class Parser(argparse.ArgumentParser):
    """Raises usage errors instead of printing them and exiting, so main() can print them as JSON with --json.
    Subcommand parsers are of the same class (argparse creates them with the parent's class)."""

    def error(self, message: str) -> NoReturn:
        raise ArgumentUsageError(message, usage=self.format_usage(), prog=self.prog)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="tidal", description="Command-line client for the Tidal training platform.",
                    epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # jobs registers `job` (show.py) after `jobs`
    for module in (account, jobs, logs, capacity, pools, services, tracking, costs, budget, reliability, replay):
        module.register(sub)
    return parser


def wants_json(argv: list[str]) -> bool:
    """--json among the options, for errors found before the arguments are parsed."""
    options = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in options


def report(error: CliError, as_json: bool) -> int:
    """Print the error on stderr and return its exit status: with --json one line of JSON, else one line
    (`tidal: ...`), or argparse's usage line and its error for bad arguments."""
    if as_json:
        print(json.dumps(error.as_json(), default=str), file=sys.stderr)
    else:
        print(error.text(), file=sys.stderr)
    return error.exit_status


# Options whose values may start with "-" (`--sort -metric.loss`), which argparse would read as an option.
DASHED_VALUES = {"--sort"}


def attach_dashed_values(argv: list[str]) -> list[str]:
    """`--sort -metric.loss` -> `--sort=-metric.loss`, so argparse takes the value as the option's."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in DASHED_VALUES and arg.startswith("-") and arg != "--" and len(arg) > 1:
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = attach_dashed_values(sys.argv[1:] if argv is None else list(argv))
    try:
        args = build_parser().parse_args(argv)
    except CliError as error:
        return report(error, wants_json(argv))
    except SystemExit as exit_:  # --help (0) returns instead of killing an embedding caller
        return int(exit_.code or 0)
    try:
        args.handler(args)
    except CliError as error:
        return report(error, args.json)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tidal jobs | head`
        sys.stderr.close()
        return 0
    finally:
        Api.close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
