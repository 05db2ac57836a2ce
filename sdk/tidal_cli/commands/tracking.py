"""runs, run, metrics: experiment tracking (the runs the SDK, MLflow or a job logged, and their series)."""

from __future__ import annotations

import argparse
import sys

from tidal_cli.client import Api, ApiError, CliError, UsageError
from tidal_cli.commands import add_command, list_rows, positive
from tidal_cli.csvcells import write_csv
from tidal_cli.humanize import duration, parse_time, relative
from tidal_cli.output import emit_json, fields, table, truncate

RUN_STATUSES = ["RUNNING", "FINISHED", "FAILED", "KILLED"]


def run_id(value: str) -> int:
    """`7` or `#7`."""
    text = value.strip().lstrip("#")
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a run id: {value!r} (a positive number, e.g. 7)")
    return int(text)


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


def experiment_id(name_or_id: str, project: str | None) -> int:
    """An experiment id, or the id of the experiment of that name among the caller's (in `project`)."""
    if name_or_id.isdigit():
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
                     sort=args.sort, param=args.param or None)
    if args.json:
        return emit_json(rows)
    columns = [("id", "ID"), ("project", "PROJECT"), ("experiment_name", "EXPERIMENT", lambda v: truncate(v, 24)),
               ("name", "NAME", lambda v: truncate(v, 32)), ("status", "STATUS"), ("job", "JOB"),
               ("started_at", "STARTED", relative), ("duration", "DURATION")]
    kind, _, key = (args.sort or "").lstrip("-").partition(".")
    for row in rows:
        start, end = parse_time(row.get("started_at")), parse_time(row.get("ended_at"))
        row["duration"] = duration((end - start).total_seconds()) if start and end else "-"
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
    print(f"Run {run['id']}: {run['name']}  [{run['status']}]")
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
        ("key", "KEY"), ("last", "LAST", number), ("step", "STEP"), ("min", "MIN", number), ("max", "MAX", number),
    ], empty="(none logged)")))
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


def register(sub: argparse._SubParsersAction) -> None:
    runs = add_command(sub, "runs", cmd_runs, "tracked runs: filter by project, experiment, status; sort by a metric")
    runs.add_argument("--project", help="only this project")
    runs.add_argument("--experiment", help="only this experiment (its name, or its id)")
    runs.add_argument("--status", type=run_status, help=f"only runs in this status ({', '.join(RUN_STATUSES)})")
    runs.add_argument("--param", action="append", metavar="KEY:VALUE", help="only runs with this param (repeatable)")
    runs.add_argument("--sort", metavar="[-]metric.KEY|[-]param.KEY",
                      help="order by a metric's last value or a param, e.g. -metric.accuracy (default: newest first)")
    runs.add_argument("--limit", type=positive, default=100, help="at most this many rows (default 100)")
    run = add_command(sub, "run", cmd_run, "a run's params, last metrics and open alerts")
    run.add_argument("id", type=run_id, help="the run id")
    metrics = add_command(sub, "metrics", cmd_metrics, "a metric of a run: a table of step and value, or CSV")
    metrics.add_argument("run", type=run_id, help="the run id")
    metrics.add_argument("key", help="the metric, e.g. loss or system/cpu_percent")
    metrics.add_argument("--csv", action="store_true", help="every point at full resolution as CSV (key,step,value)")
    metrics.add_argument("--max-points", type=positive, help="downsample to at most N points (2-100000; default "
                         "the server's, 1000)")
