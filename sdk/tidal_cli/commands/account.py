"""login, whoami, projects."""

from __future__ import annotations

import argparse

from tidal_cli.client import Api, UsageError, load_config, save_config
from tidal_cli.commands import add_command
from tidal_cli.output import emit_json, table


def cmd_login(args: argparse.Namespace) -> None:
    config = load_config()
    url = args.url or config.get("url")
    if not url or not args.token:
        raise UsageError("tidal login needs --url (the first time) and --token (create one under Settings in the "
                         "UI).")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url must start with http:// or https://, got {url!r}", fields={"--url": [
            "must start with http:// or https://"]})
    me = Api(url, args.token).get("me/")
    config.update({"url": url, "token": args.token})
    if args.project:
        config["project"] = args.project
    save_config(config)
    if args.json:
        return emit_json({"url": url, "username": me["username"], "project": config.get("project"),
                          "read_only": bool(me.get("read_only"))})
    access = " with a read-only token" if me.get("read_only") else ""
    print(f"Logged in to {url} as {me['username']}{access}."
          + (f" Default project: {args.project}." if args.project else ""))


def cmd_whoami(args: argparse.Namespace) -> None:
    me = Api.from_config().get("me/")
    if args.json:
        return emit_json(me)
    print(f"{me['username']}" + (" (platform staff)" if me.get("is_staff") else ""))
    print(table(me["memberships"], [("organization", "ORGANIZATION"), ("project", "PROJECT"), ("role", "ROLE")]))


def cmd_projects(args: argparse.Namespace) -> None:
    rows = Api.from_config().all_pages("projects/")
    if args.json:
        return emit_json(rows)
    print(table(rows, [("slug", "PROJECT"), ("organization", "ORGANIZATION"), ("role", "ROLE"), ("name", "NAME")]))


def register(sub: argparse._SubParsersAction) -> None:
    login = add_command(sub, "login", cmd_login, "store the server URL and your API token",
                        "Check the token against the server and store it (with the URL) in the config file.")
    login.add_argument("--url", help="e.g. http://127.0.0.1:8000")
    login.add_argument("--token", help="a personal API token (tdl_...)")
    login.add_argument("--project", help="default project for `tidal submit`")
    add_command(sub, "whoami", cmd_whoami, "who you are and your projects")
    add_command(sub, "projects", cmd_projects, "list your projects")
