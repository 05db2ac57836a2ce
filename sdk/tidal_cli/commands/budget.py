"""budget: a project's monthly budget, what it spent this month and where the month is heading; `budget set`
creates or changes it (project admins and owners)."""

from __future__ import annotations

import argparse

from tidal_cli.client import Api, UsageError
from tidal_cli.commands import add_command, default_project, list_rows
from tidal_cli.digits import is_digits
from tidal_cli.output import emit_json, table


def threshold_list(value: str) -> list[int]:
    """`50,80,100` (an empty string: no alerts). The server checks the range and order."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not all(is_digits(item) for item in items):
        raise argparse.ArgumentTypeError(f"not a list of whole percents: {value!r} (e.g. 50,80,100)")
    return [int(item) for item in items]


def amount(value: str) -> str:
    """Kept as text, so 0.10 is not rounded on the way; the server refuses what is not a number >= 0."""
    text = value.strip().replace(",", "").replace("_", "")
    try:
        float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an amount: {value!r} (e.g. 10000 or 2500.50)") from None
    return text


def money(value: float | str | None, currency: str) -> str:
    return "-" if value is None else f"{float(value):,.2f} {currency}"


def cmd_budget(args: argparse.Namespace) -> None:
    rows = list_rows("budgets/", project=args.project)
    if args.json:
        return emit_json(rows)
    for row in rows:
        currency = row.get("currency", "")
        row["budget"] = money(row["amount"], currency)
        row["spent"] = money(row["spent_this_month"], currency)
        row["pct"] = "-" if row["percent"] is None else f"{row['percent']:.1f}%"
        row["expected"] = money(row["forecast"], currency)
    print(table(rows, [
        ("project", "PROJECT"), ("month", "MONTH"), ("budget", "BUDGET"), ("spent", "SPENT"), ("pct", "%"),
        ("expected", "FORECAST"), ("hard", "HARD"), ("exhausted", "SPENT ALL"),
        ("thresholds", "ALERTS AT", lambda v: ", ".join(f"{t}%" for t in v) or "-"),
        ("forecast_basis", "FORECAST FROM"),
    ], empty="No budget" + (f" for project {args.project}" if args.project else " in your projects") + "."))
    if any(row["hard"] and row["exhausted"] for row in rows):
        print("\nA hard budget that is spent admits only preemptible jobs of its project until the month ends.")


def cmd_budget_set(args: argparse.Namespace) -> None:
    project = default_project(args.project)
    if not project:
        raise UsageError("Which project? Give --project (or set a default project with `tidal login`).",
                         fields={"--project": ["required"]})
    values = {name: value for name, value in (("amount", args.amount), ("hard", args.hard),
                                               ("thresholds", args.thresholds)) if value is not None}
    api = Api.from_config()
    existing = list_rows("budgets/", project=project)
    if existing:
        saved = api.patch(f"budgets/{existing[0]['id']}/", values)
    else:
        saved = api.post("budgets/", {"project": project, **values})
    if args.json:
        return emit_json(saved)
    currency = saved.get("currency", "")
    kind = "hard" if saved["hard"] else "soft"
    alerts = ", ".join(f"{t}%" for t in saved["thresholds"]) or "no alerts"
    print(f"Budget of {saved['project']}: {money(saved['amount'], currency)} a month ({kind}; alerts at {alerts}). "
          f"Spent in {saved['month']}: {money(saved['spent_this_month'], currency)}.")


def register(sub: argparse._SubParsersAction) -> None:
    budget = add_command(sub, "budget", cmd_budget, "monthly budgets: amount, spent this month, percent, forecast",
                         "Each project's monthly budget with what it spent this month (UTC), the percent, the "
                         "forecast for the month's end, and whether it is hard (once spent, only preemptible jobs "
                         "are admitted). `tidal budget set` creates or changes one.")
    budget.add_argument("--project", help="only this project")
    actions = budget.add_subparsers(dest="action", metavar="ACTION")
    change = add_command(actions, "set", cmd_budget_set, "create or change a project's budget (admins and owners)")
    change.add_argument("--project", help="the project (default: your default project)")
    change.add_argument("--amount", type=amount, help="per calendar month, in the platform's currency "
                                                      "(required for a new budget)")
    change.add_argument("--hard", action=argparse.BooleanOptionalAction, default=None,
                        help="once spent, admit only preemptible jobs (--no-hard: only alert)")
    change.add_argument("--thresholds", type=threshold_list,
                        help="percents that alert once a month, ascending (default 50,80,100; '' for none)")
