"""`tidal job <id>`: the spec summary, replica groups, the current attempt's placement, why it waits, every attempt
with why it ended, the failure diagnosis of each that ended other than succeeded, an elastic job's workers and
resizes with why, and the events timeline."""

from __future__ import annotations

import argparse
import shlex

from tidal_cli.client import Api, ApiError
from tidal_cli.commands import add_command, job_id, job_not_found
from tidal_cli.humanize import duration, estimate, relative, timestamp
from tidal_cli.output import emit_json, fields, table


def waiting_summary(waiting: dict | None, project: str = "", flavor: str = "") -> list[tuple[str, str | None]]:
    """Label/value pairs explaining a queued job: reason, positions, ETA."""
    if not waiting:
        return []
    if not waiting.get("code") and not waiting.get("flavor_position"):  # the scheduler has not looked at it yet
        return [("reason", waiting.get("reason") or "waiting for the next scheduling cycle")]
    positions = []
    if waiting.get("project_position"):
        positions.append(f"#{waiting['project_position']} in project {project}".rstrip())
    if waiting.get("flavor_position"):
        positions.append(f"#{waiting['flavor_position']} in the {flavor} queue".replace("the  queue", "its queue"))
    start = estimate(waiting)
    if waiting.get("eta"):
        start += f" ({timestamp(waiting['eta'])})"
    return [("reason", waiting.get("reason") or "-"), ("code", waiting.get("code")),
            ("position", ", ".join(positions) or "not yet ranked"), ("estimated start", start)]


def _command_line(job: dict) -> str:
    return shlex.join([*(job.get("command") or []), *(job.get("args") or [])])


def _times(job: dict) -> str:
    """Submission, the current attempt's times (none while queued for a new attempt), the end."""
    parts = [f"{label} {relative(job.get(key))}" for label, key in
             (("submitted", "submitted_at"), ("admitted", "admitted_at"), ("started", "started_at"),
              ("attempt ended", "ended_at"), ("finished", "finished_at")) if job.get(key)]
    return ", ".join(parts)


def _nodes(placement: list[dict] | None) -> str:
    return ", ".join(sorted({row["node"] for row in placement or []})) or "-"


def _why(attempt: dict) -> str:
    """Why an attempt ended, with its cause and exit code; or that it still runs."""
    if not attempt.get("outcome"):
        return "(current)"
    why = attempt.get("reason") or ""
    if attempt.get("cause"):
        why = f"{attempt['cause']}: {why}" if why else attempt["cause"]
    if attempt.get("exit_code") is not None:
        why += f" (exit code {attempt['exit_code']})"
    return why


def _memory(mib: int | None) -> str:
    mib = mib or 0
    return f"{mib / 1024:g} GiB" if mib >= 1024 else f"{mib} MiB"


def _change(event: dict) -> str:
    if not event.get("to_state"):
        return event.get("kind") or "note"
    return f"{event.get('from_state') or 'new'} -> {event['to_state']}"


def render_job(job: dict) -> str:
    out = [f"Job {job['id']}  {job['name']}  [{job['state']}]"]
    out.append(fields([
        ("project", job.get("project")), ("submitter", job.get("submitter")),
        ("stage / launcher", f"{job.get('stage')} / {job.get('launcher')}"),
        ("priority", job.get("priority_class")), ("image", job.get("image")), ("command", _command_line(job)),
        ("devices", f"{job.get('total_devices')} x {job.get('flavor')}"
         + (" (its minimum need)" if job.get("elastic") else "")),
        ("workers", (job.get("elastic") or {}).get("summary")),
        ("resize cooldown", duration(job["resize_cooldown"]) if job.get("elastic") else None),
        ("topology", job.get("topology")),
        ("max runtime", duration(job["max_runtime"]) if job.get("max_runtime") else "none"),
        ("min runtime", duration(job["min_runtime"]) if job.get("min_runtime") else None),
        ("retries", f"{job.get('retry_limit')} (backoff {duration(job.get('retry_backoff'))})"
         if job.get("retry_limit") else None),
        ("attempt", job.get("attempt") if (job.get("attempt") or 1) > 1 else None),
        ("checkpoint", job.get("checkpoint_path")), ("experiment", job.get("experiment")),
        ("labels", ", ".join(f"{k}={v}" for k, v in (job.get("labels") or {}).items())),
        ("env", ", ".join(sorted(job.get("env") or {}))),
        ("launcher options", ", ".join(f"{k}={v}" for k, v in (job.get("launcher_options") or {}).items())),
        ("borrowed", f"{job['borrowed']} devices from other projects" if job.get("borrowed") else None),
        ("failure", job.get("failure_cause")), ("times", _times(job)),
    ]))
    groups = [{**g, "replicas": f"{g['min_replicas']}..{g['replicas']}" if g.get("min_replicas") else g["replicas"]}
              for g in job.get("groups") or []]
    out += ["", "Replica groups", table(groups, [
        ("role", "ROLE"), ("replicas", "REPLICAS"), ("devices", "DEVICES/REPLICA"), ("flavor", "FLAVOR"),
        ("cpu_millis", "CPU", lambda v: f"{(v or 0) / 1000:g}"), ("memory_mib", "MEMORY", _memory),
        ("rdma", "RDMA")])]
    if job.get("placement") and not job.get("ended_at"):
        out += ["", f"Placement on {job.get('cluster') or '-'}", table(job["placement"], [
            ("role", "ROLE"), ("index", "INDEX"), ("node", "NODE"), ("devices", "DEVICES")])]
    if job.get("attempts"):
        rows = [{**a, "nodes": _nodes(a.get("placement")), "why": _why(a)} for a in job["attempts"]]
        out += ["", "Attempts", table(rows, [
            ("number", "#"), ("cluster", "CLUSTER"), ("nodes", "NODES"), ("admitted_at", "ADMITTED", timestamp),
            ("started_at", "STARTED", timestamp), ("ended_at", "ENDED", timestamp), ("outcome", "OUTCOME"),
            ("why", "WHY IT ENDED")])]
    resizes = [{**r, "attempt": a["number"], "size": f"{r['old_replicas']} -> {r['new_replicas']}"}
               for a in job.get("attempts") or [] for r in a.get("resizes") or []]
    if resizes:
        out += ["", "Resizes", table(resizes, [
            ("at", "TIME", timestamp), ("attempt", "ATTEMPT"), ("kind", "KIND"), ("size", "WORKERS"),
            ("reason", "WHY")])]
    if job.get("diagnoses"):
        out += ["", "Diagnosis", *_diagnoses(job["diagnoses"])]
    if job.get("waiting"):
        out += ["", "Waiting", fields(waiting_summary(job["waiting"], job.get("project", ""), job.get("flavor", "")))]
    events = [{**e, "change": _change(e)} for e in job.get("events") or []]
    out += ["", "Events", table(events, [("created_at", "TIME", timestamp), ("change", "CHANGE"),
                                         ("actor_name", "BY"), ("reason", "REASON")])]
    return "\n".join(out)


_EVIDENCE_SHOWN = 5


def _diagnoses(diagnoses: list[dict]) -> list[str]:
    """Per attempt that ended other than succeeded: its cause class, confidence, summary, action and evidence."""
    lines = []
    for d in diagnoses:
        quarantined = f"; quarantined {', '.join(d['quarantined'])}" if d.get("quarantined") else ""
        lines.append(f"attempt {d['attempt']}: {d['cause']} ({d.get('kind')}, confidence {d['confidence']:.2f})"
                     f"{quarantined}")
        lines.append(f"  {d.get('summary', '')}")
        lines.append(f"  action: {d.get('action_text') or d.get('action')}")
        for item in (d.get("evidence") or [])[:_EVIDENCE_SHOWN]:
            where = " ".join(str(part) for part in (item.get("replica"), f"line {item['line']}" if item.get("line")
                                                    else "", f"on {item['node']}" if item.get("node") else "") if part)
            lines.append(f"  - [{item['source']}{' ' + where if where else ''}] {item['text'][:200]}")
    return lines


def cmd_job(args: argparse.Namespace) -> None:
    api = Api.from_config()
    try:
        job = api.get(f"jobs/{args.id}/")
    except ApiError as error:
        raise job_not_found(error, args.id) from None
    if any(a.get("outcome") not in (None, "", "succeeded") for a in job.get("attempts") or []):
        job["diagnoses"] = api.get("diagnoses/", job=args.id).get("results", [])
    if args.json:
        return emit_json(job)
    print(render_job(job))


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(sub, "job", cmd_job, "show one job: spec, replicas, placement, why it waits, events")
    parser.add_argument("id", type=job_id, help="the job id")
