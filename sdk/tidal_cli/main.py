"""tidal: log in, look at projects and quotas, submit and follow jobs. `tidal --help` lists the commands."""

from __future__ import annotations

import argparse
import sys

from tidal_cli.client import Api, CliError
from tidal_cli.commands import account, capacity, jobs, logs, replay

EPILOG = """configuration: ~/.config/tidal/config.json (written by `tidal login`; TIDAL_CONFIG moves it);
TIDAL_URL, TIDAL_TOKEN and TIDAL_PROJECT override it. Every command exits 0 on success, 1 on an error
(with a one-line message on stderr) and 2 on a usage error."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidal", description="Command-line client for the Tidal training platform.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (account, jobs, logs, capacity, replay):  # jobs registers `job` (show.py) after `jobs`
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0) and usage errors (2) return instead of killing an embedding caller
        return int(exit_.code or 0)
    try:
        args.handler(args)
    except CliError as error:
        print(f"tidal: {error}", file=sys.stderr)
        return 1
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
