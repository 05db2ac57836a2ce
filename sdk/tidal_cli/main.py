"""tidal: log in, look at projects, submit and follow jobs. `tidal --help` lists the commands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from tidal_cli.client import Api, CliError, load_config, save_config
from tidal_cli.output import emit_json, table

COMMANDS: dict[str, Callable[[argparse.Namespace], None]] = {}


def command(name: str):
    def register(func: Callable[[argparse.Namespace], None]):
        COMMANDS[name] = func
        return func

    return register


@command("login")
def cmd_login(args: argparse.Namespace) -> None:
    config = load_config()
    url = args.url or config.get("url")
    if not url or not args.token:
        raise CliError("tidal login needs --url (the first time) and --token (create one under Settings in the UI).")
    me = Api(url, args.token).get("me/")
    config.update({"url": url, "token": args.token})
    if args.project:
        config["project"] = args.project
    save_config(config)
    print(f"Logged in to {url} as {me['username']}.")


@command("whoami")
def cmd_whoami(args: argparse.Namespace) -> None:
    me = Api.from_config().get("me/")
    if args.json:
        return emit_json(me)
    print(f"{me['username']}" + (" (platform staff)" if me["is_staff"] else ""))
    print(table(me["memberships"], [("organization", "ORGANIZATION"), ("project", "PROJECT"), ("role", "ROLE")]))


@command("projects")
def cmd_projects(args: argparse.Namespace) -> None:
    rows = Api.from_config().all_pages("projects/")
    if args.json:
        return emit_json(rows)
    print(table(rows, [("slug", "PROJECT"), ("organization", "ORGANIZATION"), ("role", "ROLE"), ("name", "NAME")]))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidal", description="Command-line client for the Tidal training platform.")
    sub = parser.add_subparsers(dest="command", required=True)
    login = sub.add_parser("login", help="store the server URL and your API token")
    login.add_argument("--url", help="e.g. http://127.0.0.1:8000")
    login.add_argument("--token", help="a personal API token (tdl_...)")
    login.add_argument("--project", help="default project for other commands")
    for name, help_text in (("whoami", "who you are and your projects"), ("projects", "list your projects")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--json", action="store_true", help="print JSON for scripts")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        COMMANDS[args.command](args)
    except CliError as error:
        print(f"tidal: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
