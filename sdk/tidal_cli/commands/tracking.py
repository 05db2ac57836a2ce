"""runs, run, metrics: experiment tracking (the runs the SDK, MLflow or a job logged, and their series)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from tidal_cli.client import Api, ApiError, CliError, UsageError
from tidal_cli.commands import add_command, list_rows, positive
from tidal_cli.csvcells import write_csv
from tidal_cli.digits import is_digits
from tidal_cli.humanize import duration, parse_time, relative
from tidal_cli.output import Column, emit_json, fields, table, truncate

RUN_STATUSES = ["RUNNING", "FINISHED", "FAILED", "KILLED"]


def run_id(value: str) -> int:
    """`7` or `#7`."""
    text = value.strip().lstrip("#")
    if not is_digits(text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a run id: {value!r} (a positive number, e.g. 7)")
    return int(text)


def status_text(run: dict) -> str:
    """The run's status, and what its job is doing when that differs (a run continues while its job is queued
    again after a preemption: "RUNNING, job queued (preempted)")."""
    state = run.get("state") or ""
    return run["status"] if state.upper() == run["status"] else f"{run['status']}, job {state.lower()}"


def run_status(value: str) -> str:
    status = value.strip().upper()
    if status not in RUN_STATUSES:
        raise argparse.ArgumentTypeError(f"unknown status {value!r} (one of {', '.join(RUN_STATUSES)})")
    return status


def run_not_found(error: ApiError, run: int) -> CliError:
    if error.status == 404:
        return error.reworded(f"Run {run} not found: it does not exist or is not in one of your projects.")
    return error


def number(value: object) -> str:
    """A metric value as people read it: 4 significant digits, or the special ones by name."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def marked_number(value: object) -> str:
    """A last value, a non-finite one ("NaN", "Infinity", "-Infinity" in the API) marked with a *."""
    return f"{value}*" if isinstance(value, str) else number(value)


def experiment_id(name_or_id: str, project: str | None) -> int:
    """An experiment id, or the id of the experiment of that name among the caller's (in `project`)."""
    if is_digits(name_or_id):
        return int(name_or_id)
    found = [e for e in list_rows("experiments/", project=project) if e["name"] == name_or_id]
    where = f" in project {project}" if project else " in your projects"
    if not found:
        raise CliError(f"No experiment named {name_or_id!r}{where}.", code="not_found",
                       fields={"experiment": [f"No experiment named {name_or_id!r}."]})
    if len(found) > 1:
        projects = ", ".join(sorted(e["project"] for e in found))
        raise CliError(f"Experiment {name_or_id!r} exists in projects {projects}: give --project.",
                       code="ambiguous", fields={"experiment": ["Ambiguous: give --project."]})
    return found[0]["id"]


def cmd_runs(args: argparse.Namespace) -> None:
    experiment = experiment_id(args.experiment, args.project) if args.experiment else None
    rows = list_rows("runs/", limit=args.limit, project=args.project, experiment=experiment, status=args.status,
                     sort=args.sort, param=args.param or None, tag=args.tag or None, name=args.name,
                     lifecycle=args.lifecycle)
    if args.json:
        return emit_json(rows)
    columns: list[Column] = [
        ("id", "ID"), ("project", "PROJECT"), ("experiment_name", "EXPERIMENT", lambda v: truncate(v, 24)),
        ("name", "NAME", lambda v: truncate(v, 32)), ("shown", "STATUS"), ("job", "JOB"),
        ("started_at", "STARTED", relative), ("duration", "DURATION")]
    kind, _, key = (args.sort or "").lstrip("-").partition(".")
    for row in rows:
        start, end = parse_time(row.get("started_at")), parse_time(row.get("ended_at"))
        row["duration"] = duration((end - start).total_seconds()) if start and end else "-"
        row["shown"] = status_text(row)
        if kind == "metric":
            row["sorted_by"] = number(((row.get("summary") or {}).get(key) or {}).get("last"))
        elif kind == "param":
            row["sorted_by"] = (row.get("params") or {}).get(key)
    if kind in ("metric", "param"):
        columns.append(("sorted_by", key.upper()))
    print(table(rows, columns, empty="No runs."))
    if len(rows) == args.limit:
        print(f"(first {args.limit}; --limit N shows more)")


def cmd_run(args: argparse.Namespace) -> None:
    api = Api.from_config()
    try:
        run = api.get(f"runs/{args.id}/")
    except ApiError as error:
        raise run_not_found(error, args.id) from None
    alerts = [a for a in api.all_pages("alerts/", run=args.id) if not a.get("resolved_at")]
    if args.json:
        return emit_json({**run, "open_alerts": alerts})
    print(f"Run {run['id']}: {run['name']}  [{status_text(run)}]")
    ended = f"{relative(run.get('ended_at'))}" if run.get("ended_at") else None
    print(fields([("project", run["project"]), ("experiment", f"{run['experiment_name']} (id {run['experiment']})"),
                  ("job", run.get("job")), ("attempt", run.get("attempt") if run.get("job") else None),
                  ("user", run.get("user_name")), ("started", relative(run.get("started_at"))), ("ended", ended),
                  ("note", truncate(run.get("note"), 100))]))
    params = run.get("params") or {}
    print("\nParams")
    print(fields(sorted(params.items())) if params else "  (none)")
    summary = run.get("summary") or {}
    print("\nMetrics (last value)")
    print(_indented(table([{"key": key, **value} for key, value in sorted(summary.items())], [
        ("key", "KEY"), ("last", "LAST", marked_number), ("step", "STEP"), ("min", "MIN", number),
        ("max", "MAX", number)], empty="(none logged)")))
    if any(value.get("last_finite") is False for value in summary.values()):
        print("  * not a finite number: the last value logged was NaN or infinite")
    print("\nOpen alerts")
    print(_indented(table(alerts, [("rule", "RULE"), ("key", "KEY"), ("step", "STEP"),
                                   ("opened_at", "OPENED", relative), ("message", "MESSAGE")], empty="(none)")))


def _indented(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def cmd_metrics(args: argparse.Namespace) -> None:
    if args.csv and args.json:
        raise UsageError("--csv prints CSV, --json the series as JSON: give one of them")
    api = Api.from_config()
    try:
        if args.csv:
            write_csv(api.stream_lines(f"runs/{args.run}/csv/", key=args.key), sys.stdout)
            return
        series = api.get(f"runs/{args.run}/series/", key=args.key, max_points=args.max_points)
        if not series["total"]:
            keys = sorted(api.get(f"runs/{args.run}/").get("summary") or {})
            raise CliError(f"Run {args.run} has no metric {args.key!r}"
                           + (f" (its metrics: {', '.join(keys)})" if keys else " (it has logged none)"),
                           code="not_found", fields={"key": [f"No metric {args.key!r}."]})
    except ApiError as error:
        raise run_not_found(error, args.run) from None
    if args.json:
        return emit_json(series)
    rows = [{"step": step, "value": value} for step, value in series["points"]]
    rows += [{"step": step, "value": marker} for step, marker in series["markers"]]
    rows.sort(key=lambda row: row["step"])
    shown = len(series["points"]) + len(series["markers"])
    if shown < series["total"]:
        print(f"# {args.key}: {shown} of {series['total']} points (downsampled, every bucket's min and max kept; "
              "--csv gives them all)")
    print(table(rows, [("step", "STEP"), ("value", args.key.upper(), number)]))


def alert_id(value: str) -> int:
    text = value.strip().lstrip("#")
    if not is_digits(text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not an alert id: {value!r} (a positive number, e.g. 12)")
    return int(text)


ALERT_COLUMNS: list[Column] = [("id", "ID"), ("run", "RUN"), ("rule", "RULE"), ("key", "KEY"), ("step", "STEP"),
                 ("opened_at", "OPENED", relative), ("state", "STATE"), ("message", "MESSAGE")]


def alert_state(alert: dict) -> str:
    if alert.get("resolved_at"):
        return {"resolved": f"resolved by {alert.get('resolved_by')}", "muted": f"muted by {alert.get('resolved_by')}",
                "run_ended": "closed: run ended"}.get(alert.get("resolution") or "", "cleared")
    return f"acknowledged by {alert['acknowledged_by']}" if alert.get("acknowledged_at") else "open"


def cmd_alerts(args: argparse.Namespace) -> None:
    rows = Api.from_config().all_pages("alerts/", limit=args.limit, run=args.run)
    if not args.all:
        rows = [row for row in rows if not row.get("resolved_at")]
    if args.json:
        return emit_json(rows)
    for row in rows:
        row["state"] = alert_state(row)
    print(table(rows, ALERT_COLUMNS, empty="No open alerts." if not args.all else "No alerts."))


def alert_not_found(error: ApiError, alert: int) -> CliError:
    if error.status == 404:
        return error.reworded(f"Alert {alert} not found: it does not exist or is not in one of your projects.")
    return error


def alert_action(verb: str, done: str) -> Callable[[argparse.Namespace], None]:
    def handler(args: argparse.Namespace) -> None:
        try:
            alert = Api.from_config().post(f"alerts/{args.id}/{verb}/")
        except ApiError as error:
            raise alert_not_found(error, args.id) from None
        if args.json:
            return emit_json(alert)
        print(f"Alert {alert['id']} ({alert['rule']} on run {alert['run']}) {done}: {alert_state(alert)}.")
    return handler


def mute_action(verb: str) -> Callable[[argparse.Namespace], None]:
    def handler(args: argparse.Namespace) -> None:
        body = {"rule": args.rule} if args.rule else {}
        try:
            run = Api.from_config().post(f"runs/{args.run}/{verb}/", body)
        except ApiError as error:
            raise run_not_found(error, args.run) from None
        if args.json:
            return emit_json(run)
        muted = ", ".join("every rule" if rule == "*" else rule for rule in run["muted_rules"]) or "nothing"
        print(f"Run {run['id']} ({run['name']}): muted {muted}.")
    return handler


def tag_pair(value: str) -> tuple[str, str]:
    key, sep, text = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"not a tag: {value!r} (use KEY=VALUE)")
    return key.strip(), text


def _changed(args: argparse.Namespace, call: Callable[[Api], object], done: str) -> None:
    try:
        run = call(Api.from_config())
    except ApiError as error:
        raise run_not_found(error, args.id) from None
    if args.json:
        return emit_json(run if isinstance(run, dict) else {"id": args.id, "deleted": True})
    print(done.format(**run) if isinstance(run, dict) else done.format(id=args.id))


def cmd_runs_rename(args: argparse.Namespace) -> None:
    _changed(args, lambda api: api.patch(f"runs/{args.id}/", {"name": args.name}), "Run {id} is now named {name!r}.")


def cmd_runs_note(args: argparse.Namespace) -> None:
    text = sys.stdin.read() if args.text == "-" else args.text
    _changed(args, lambda api: api.patch(f"runs/{args.id}/", {"note": text}), "Run {id}'s note is saved.")


def cmd_runs_tag(args: argparse.Namespace) -> None:
    if not args.tags and not args.remove:
        raise UsageError("give tags to set (KEY=VALUE) or --remove KEY")
    body = {"set": dict(args.tags), "remove": args.remove or []}

    def shown(run: dict) -> str:
        tags = ", ".join(f"{k}={v}" for k, v in sorted((run.get("tags") or {}).items())) or "none"
        return f"Run {run['id']}'s tags: {tags}."
    try:
        run = Api.from_config().post(f"runs/{args.id}/tags/", body)
    except ApiError as error:
        raise run_not_found(error, args.id) from None
    if args.json:
        return emit_json(run)
    print(shown(run))


def cmd_runs_delete(args: argparse.Namespace) -> None:
    _changed(args, lambda api: api.delete(f"runs/{args.id}/"),
             "Run {id} is deleted (hidden; `tidal runs restore {id}` brings it back).")


def cmd_runs_restore(args: argparse.Namespace) -> None:
    _changed(args, lambda api: api.post(f"runs/{args.id}/restore/"), "Run {id} ({name}) is restored.")


def register(sub: argparse._SubParsersAction) -> None:
    runs = add_command(sub, "runs", cmd_runs, "tracked runs: filter by project, experiment, status; sort by a metric")
    runs.add_argument("--project", help="only this project")
    runs.add_argument("--experiment", help="only this experiment (its name, or its id)")
    runs.add_argument("--status", type=run_status, help=f"only runs in this status ({', '.join(RUN_STATUSES)})")
    runs.add_argument("--param", action="append", metavar="KEY:VALUE", help="only runs with this param (repeatable)")
    runs.add_argument("--sort", metavar="[-]metric.KEY|[-]param.KEY",
                      help="order by a metric's last value or a param, e.g. -metric.accuracy (default: newest first)")
    runs.add_argument("--tag", action="append", metavar="KEY:VALUE", help="only runs with this tag (repeatable)")
    runs.add_argument("--name", help="only runs whose name holds this text (any case)")
    runs.add_argument("--lifecycle", choices=["active", "deleted", "all"],
                      help="active (the default: deleted runs hidden), deleted or all")
    runs.add_argument("--limit", type=positive, default=100, help="at most this many rows (default 100)")
    manage = runs.add_subparsers(dest="action", metavar="ACTION")
    renamed = add_command(manage, "rename", cmd_runs_rename, "rename a run")
    renamed.add_argument("id", type=run_id, help="the run id")
    renamed.add_argument("name", help="its new name")
    noted = add_command(manage, "note", cmd_runs_note, "set a run's note (markdown; - reads it from stdin, '' "
                        "clears it)")
    noted.add_argument("id", type=run_id, help="the run id")
    noted.add_argument("text", help="the note, or - for stdin")
    tagged = add_command(manage, "tag", cmd_runs_tag, "set tags (KEY=VALUE ...) and remove others (--remove KEY)")
    tagged.add_argument("id", type=run_id, help="the run id")
    tagged.add_argument("tags", nargs="*", type=tag_pair, metavar="KEY=VALUE", help="tags to add or change")
    tagged.add_argument("--remove", action="append", metavar="KEY", help="a tag to remove (repeatable)")
    deleted = add_command(manage, "delete", cmd_runs_delete, "delete a run (soft: hidden, restorable)")
    deleted.add_argument("id", type=run_id, help="the run id")
    restored = add_command(manage, "restore", cmd_runs_restore, "bring a deleted run back")
    restored.add_argument("id", type=run_id, help="the run id")
    run = add_command(sub, "run", cmd_run, "a run's params, last metrics and open alerts")
    run.add_argument("id", type=run_id, help="the run id")
    metrics = add_command(sub, "metrics", cmd_metrics, "a metric of a run: a table of step and value, or CSV")
    metrics.add_argument("run", type=run_id, help="the run id")
    metrics.add_argument("key", help="the metric, e.g. loss or system/cpu_percent")
    metrics.add_argument("--csv", action="store_true", help="every point at full resolution as CSV (key,step,value)")
    metrics.add_argument("--max-points", type=positive, help="downsample to at most N points (2-100000; default "
                         "the server's, 1000)")

    alerts = add_command(sub, "alerts", cmd_alerts, "training alerts: list, acknowledge, resolve, mute",
                         "Open training alerts (NaN, loss spikes, hung runs...; --all: resolved ones too). "
                         "`tidal alerts ack|resolve ID` handles one, `tidal alerts mute|unmute RUN` a run's rules.")
    alerts.add_argument("--run", type=run_id, help="only this run's")
    alerts.add_argument("--all", action="store_true", help="resolved alerts too")
    alerts.add_argument("--limit", type=positive, default=100, help="at most this many rows (default 100)")
    actions = alerts.add_subparsers(dest="action", metavar="ACTION")
    for verb, name, done, help_text in (
            ("acknowledge", "ack", "acknowledged", "mark an open alert seen (it stays open)"),
            ("resolve", "resolve", "resolved", "close an open alert by hand")):
        handled = add_command(actions, name, alert_action(verb, done), help_text)
        handled.add_argument("id", type=alert_id, help="the alert id (tidal alerts lists them)")
    for verb, help_text in (("mute", "mute a rule on a run (every rule without --rule): no more alerts there, "
                                     "its open ones close"),
                            ("unmute", "lift a rule's mute on a run (every mute without --rule)")):
        muting = add_command(actions, verb, mute_action(verb), help_text)
        muting.add_argument("run", type=run_id, help="the run id")
        muting.add_argument("--rule", help="one rule, e.g. loss_spike (default: every rule)")
