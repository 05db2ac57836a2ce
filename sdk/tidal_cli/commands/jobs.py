"""submit, jobs, cancel, resubmit, scale."""

from __future__ import annotations

import argparse
from time import monotonic, sleep

from tidal_cli import jobfile
from tidal_cli.client import Api, ApiError, CliError, UsageError
from tidal_cli.commands import (
    ACTIVE_STATES,
    add_command,
    default_project,
    job_id,
    job_not_found,
    list_rows,
    positive,
    show,
    state_list,
)
from tidal_cli.commands.show import waiting_summary
from tidal_cli.humanize import relative
from tidal_cli.output import Column, emit_json, fields, table, truncate


def _located(error: ApiError, job_file: jobfile.JobFile) -> CliError:
    """A rejected field, pointed at its line in the job file: `job.yaml line 12: groups[0].flavor: ...`."""
    if error.status != 400 or not error.fields:
        return error
    field = next(iter(error.fields))
    line = job_file.line_of(field)
    hint = " (`tidal flavors` lists them)" if field.endswith("flavor") else ""
    return error.reworded(f"{job_file.path}{f' line {line}' if line else ''}: {error}{hint}")


def _queued_note(job: dict) -> str:
    pairs = waiting_summary(job.get("waiting"), job.get("project", ""), job.get("flavor", ""))
    return fields([(label, value) for label, value in pairs if label != "code"]) if pairs else ""


def _await_decision(api: Api, job: dict, seconds: float) -> dict:
    """Poll until the scheduler has admitted the job or explained why it waits, at most `seconds`."""
    deadline = monotonic() + seconds
    while job["state"] == "queued" and not (job.get("waiting") or {}).get("code") and monotonic() < deadline:
        sleep(min(0.5, max(deadline - monotonic(), 0)))
        job = api.get(f"jobs/{job['id']}/")
    return job


def cmd_submit(args: argparse.Namespace) -> None:
    if args.quiet and args.json:
        raise UsageError("--quiet prints only the id, --json the whole job: give one of them")
    job_file = jobfile.load(args.file)
    spec = dict(job_file.spec)
    project = args.project or spec.get("project") or default_project(None)
    if not project:
        raise CliError(f"{args.file}: no project: add `project: SLUG` to the file, pass --project, or set a default "
                       "with `tidal login --project SLUG` (or TIDAL_PROJECT)", code="no_project")
    spec["project"] = project
    if args.name:
        spec["name"] = args.name
    api = Api.from_config()
    if spec.get("launcher") == "service":
        return _submit_service(api, spec, job_file, args)
    try:
        job = api.post("jobs/", spec)
    except ApiError as error:
        raise _located(error, job_file) from None
    if args.wait:
        job = _await_decision(api, job, args.wait)
    if args.json:
        return emit_json(job)
    if args.quiet:  # for scripts: JOB=$(tidal submit job.yaml --quiet)
        print(job["id"])
        return
    print(f"Submitted job {job['id']} ({job['name']}) to project {job['project']}: {job['state']}")
    note = _queued_note(job)
    if note:
        print(note)
    print(f"Follow it with: tidal job {job['id']}")


def _submit_service(api: Api, spec: dict, job_file: jobfile.JobFile, args: argparse.Namespace) -> None:
    """A file with `launcher: service` creates an inference service (docs/pools.md#services), not a job."""
    try:
        service = api.post("services/", spec)
    except ApiError as error:
        raise _located(error, job_file) from None
    if args.json:
        return emit_json(service)
    if args.quiet:
        print(service["id"])
        return
    replicas = service["replicas"]
    print(f"Created service {service['id']} ({service['name']}) in project {service['project']}, pool "
          f"{service['pool']}: {replicas['desired']} replica(s) of {replicas['min']}..{replicas['max']}, scaled on "
          f"{service['metric']} at {service['target_per_replica']:g} per replica")
    print(f"Follow it with: tidal service {service['name']} --project {service['project']}")


JOB_COLUMNS: list[Column] = [
    ("id", "ID"), ("project", "PROJECT"), ("name", "NAME", lambda v: truncate(v, 40)), ("state", "STATE"),
    ("flavor", "FLAVOR"), ("total_devices", "DEVICES"), ("priority_class", "PRIORITY"),
    ("submitted_at", "SUBMITTED", relative), ("note", "NOTE"),
]


def _note(job: dict) -> str:
    if job.get("waiting"):
        return truncate(job["waiting"].get("reason"), 70)
    if job.get("failure_cause"):
        return job["failure_cause"]
    if job["state"] == "running" and job.get("started_at"):
        return f"running for {relative(job['started_at']).removesuffix(' ago')}"
    return ""


def cmd_jobs(args: argparse.Namespace) -> None:
    states = [s for group in args.state or [] for s in group] or (None if args.all else ACTIVE_STATES)
    rows = list_rows("jobs/", limit=args.limit, project=args.project, flavor=args.flavor, state=states)
    if args.json:
        return emit_json(rows)
    empty = "No jobs" + ("" if args.all or args.state else " in progress (--all shows finished ones too)") + "."
    print(table([{**row, "note": _note(row)} for row in rows], JOB_COLUMNS, empty=empty))
    if len(rows) == args.limit:
        print(f"(first {args.limit}; --limit N shows more)")


def cmd_cancel(args: argparse.Namespace) -> None:
    try:
        job = Api.from_config().post(f"jobs/{args.id}/cancel/")
    except ApiError as error:
        raise job_not_found(error, args.id) from None
    if args.json:
        return emit_json(job)
    print(f"Cancelled job {job['id']} ({job['name']}): {job['state']}")


def cmd_resubmit(args: argparse.Namespace) -> None:
    try:
        job = Api.from_config().post(f"jobs/{args.id}/resubmit/")
    except ApiError as error:
        raise job_not_found(error, args.id) from None
    if args.json:
        return emit_json(job)
    print(f"Resubmitted job {args.id} as job {job['id']} ({job['name']}) in project {job['project']}: {job['state']}")
    note = _queued_note(job)
    if note:
        print(note)


def cmd_scale(args: argparse.Namespace) -> None:
    body = {"max": args.max, **({"role": args.role} if args.role else {})}
    try:
        job = Api.from_config().post(f"jobs/{args.id}/scale/", body)
    except ApiError as error:
        raise job_not_found(error, args.id) from None
    if args.json:
        return emit_json(job)
    print(f"Job {job['id']} ({job['name']}): {(job.get('elastic') or {}).get('summary', job['state'])}")


def register(sub: argparse._SubParsersAction) -> None:
    submit = add_command(sub, "submit", cmd_submit, "submit a job (or create a service) from a YAML file",
                         "Submit a job described by a YAML file (see sdk/examples/); a file with `launcher: service` "
                         "creates an inference service instead. The project comes from --project, else the file's "
                         "`project:`, else your default project.")
    submit.add_argument("file", help="the job file (YAML), or - for standard input")
    submit.add_argument("--project", help="project slug (overrides the file)")
    submit.add_argument("--name", help="job name (overrides the file)")
    submit.add_argument("--wait", type=float, nargs="?", const=10.0, default=0.0, metavar="SECONDS",
                        help="wait up to SECONDS (default 10) for the scheduler to admit the job or say why it waits")
    submit.add_argument("--quiet", "-q", action="store_true",
                        help="print only the new job's id, e.g. JOB=$(tidal submit job.yaml --quiet)")

    jobs = add_command(sub, "jobs", cmd_jobs, "list jobs (in progress by default)",
                       "List jobs of your projects, newest first. Without --state or --all, only jobs that have not "
                       "finished.")
    jobs.add_argument("--project", help="only this project")
    jobs.add_argument("--flavor", help="only jobs of this flavor")
    jobs.add_argument("--state", type=state_list, action="append", metavar="S",
                      help="only these states (repeat or comma-separate: queued,running)")
    jobs.add_argument("--all", action="store_true", help="include finished jobs (succeeded, failed, cancelled)")
    jobs.add_argument("--limit", type=positive, default=100, help="at most this many rows (default 100)")
    show.register(sub)

    for name, handler, text in (("cancel", cmd_cancel, "cancel a job (in any state that is not final)"),
                                ("resubmit", cmd_resubmit, "submit a new job with the same spec as a previous one")):
        parser = add_command(sub, name, handler, text)
        parser.add_argument("id", type=job_id, help="the job id")

    scale = add_command(sub, "scale", cmd_scale, "change an elastic job's maximum workers while it waits or runs",
                        "Set the maximum replicas of an elastic job's group (replicas: {min, max}). Raised, the "
                        "scheduler may grow the job into idle capacity; lowered below what it runs, it shrinks at once "
                        "(its highest ranks stop).")
    scale.add_argument("id", type=job_id, help="the job id")
    scale.add_argument("--max", type=positive, required=True, help="the new maximum replicas (at least its min)")
    scale.add_argument("--role", help="the elastic group, when the job has several")
