"""Running a replay run: where its files live, reading its frozen inputs, and the Celery task's body, which replays
every policy of the run and stores the summaries, comparisons and files.

The simulation itself is the pure package `replay/`; `replays.services` creates the runs this module executes.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from core.errors import DomainError
from costs.metering.prices import price_book
from costs.serializers import currency
from jobs import scheduling as core
from jobs.snapshot import policy_from_settings
from replay import (
    ClusterShape,
    EngineOptions,
    QuotaSet,
    TraceError,
    compare,
    format_compare,
    get_policy,
    load_cluster,
    load_quotas,
    load_trace,
    run,
    summarize,
    with_quota,
    write_outputs,
)
from replay.compare import compare_by_flavor
from replay.engine import DEFAULT_PRIORITIES, ReplayResult
from replay.results import summarize_by_flavor
from replays import selectors
from replays.costing import cost_difference, format_cost, replay_cost
from replays.models import ReplayRun, RunKind, RunStatus

logger = logging.getLogger(__name__)

CURRENT = "current"
PROGRESS_INTERVAL = 0.5  # seconds between progress writes to the database


def replay_root() -> Path:
    """Where runs keep their inputs and outputs: settings.REPLAY_DIR, else var/replays/."""
    return Path(getattr(settings, "REPLAY_DIR", None) or Path(settings.VAR_DIR) / "replays")


def run_dir(run_id: int) -> Path:
    return replay_root() / str(run_id)


def output_dir(run_id: int) -> Path:
    return run_dir(run_id) / "out"


def read_cluster(path: Path) -> ClusterShape:
    if path.suffix == ".json":
        return ClusterShape(tuple(core.Node(**n) for n in json.loads(path.read_text(encoding="utf-8"))["nodes"]))
    return load_cluster(path)


def read_quotas(path: Path, quota_scale: float = 1.0) -> QuotaSet:
    if path.suffix == ".json":
        body = json.loads(path.read_text(encoding="utf-8"))
        return QuotaSet(tuple(core.Quota(**q) for q in body["quotas"]),
                        tuple(core.Project(**p) for p in body["projects"]))
    return load_quotas(path, quota_scale=quota_scale)


def policy_for(name: str, field: str = "policy") -> tuple[str, core.Policy | str]:
    """(label, policy): a name from replay.policies, or `current` for the scheduling policy in settings."""
    if name == CURRENT:
        return CURRENT, policy_from_settings()
    try:
        get_policy(name)
    except KeyError as exc:
        raise DomainError(str(exc.args[0]), field=field) from None
    return name, name


def trace_error(err: TraceError, name: str) -> str:
    """The error as the person sent it: their file name and the line, not our storage path."""
    return str(err).replace(err.source, name, 1)


# Running --------------------------------------------------------------------------------------------------------

def _jsonable(value: Any) -> Any:
    """Plain JSON for a JSONField (PostgreSQL refuses NaN): numpy scalars as floats, NaN/inf as None."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bool | int | str) or value is None:
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return number if math.isfinite(number) else None


def _input(folder: Path, stem: str) -> Path:
    found = sorted(folder.glob(f"{stem}.*"))
    if not found:
        raise FileNotFoundError(f"{stem} input of the run is missing from {folder}")
    return found[0]


def _plan(row: ReplayRun, quotas: QuotaSet, options: EngineOptions) -> list[tuple[str, Any, QuotaSet, EngineOptions]]:
    """(label, policy, quotas, options) per replay of the run: the policy and the --compare list, or for a
    what-if the current configuration and the proposed one."""
    if row.kind != RunKind.WHATIF:
        plan = []
        for name in [row.policy, *row.compare]:
            label, pol = policy_for(name)
            plan.append((label, pol, quotas, options))
        return plan
    change = row.change
    base = policy_from_settings()
    policy2, quotas2, options2 = base, quotas, options
    if change["kind"] == "quota":
        quotas2 = with_quota(quotas, change["project"], change["flavor"], **{change["field"]: change["value"]})
    elif change["kind"] == "priority":
        options2 = replace(options, priorities={**options.priorities, change["name"]: change["value"]})
    elif change["kind"] == "policy":
        policy2 = replace(base, **{change["field"]: change["value"]})
    return [("current", base, quotas, options), ("proposed", policy2, quotas2, options2)]


def _progress_writer(run_id: int, steps: int) -> Callable[[int], Callable[[int, int, float], None]]:
    """Progress over all replays of a run: a callback per step that writes progress and ETA at most twice a
    second (and always at the end of a step)."""
    t0 = time.monotonic()
    last = [0.0]

    def for_step(step: int) -> Callable[[int, int, float], None]:
        def report(done: int, total: int, _now: float) -> None:
            wall = time.monotonic()
            if done < total and wall - last[0] < PROGRESS_INTERVAL:
                return
            last[0] = wall
            frac = min(1.0, (step + (done / total if total else 1.0)) / steps)
            eta = (wall - t0) * (1 - frac) / frac if frac > 0 else None
            ReplayRun.objects.filter(pk=run_id).update(progress=round(frac, 4), eta_seconds=eta)

        return report

    return for_step


def _summary(result: ReplayResult) -> dict[str, Any]:
    """summarize() with the per-flavor figures beside it (`by_flavor`): devices of different flavors are never
    added up on the what-if page."""
    return {**summarize(result), "by_flavor": summarize_by_flavor(result)}


def replay_execute(run_id: int) -> ReplayRun | None:
    """The task body: replay every policy of the run, store summaries, comparisons and files. Never raises for a
    failed replay: the run ends `failed` with the message."""
    row = selectors.run_by_id(run_id)
    if row is None or row.status != RunStatus.QUEUED:
        return row  # deleted, or already taken by another delivery of the task
    claimed = ReplayRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=timezone.now(), progress=0.0)
    if not claimed:
        return selectors.run_by_id(run_id)
    try:
        folder = run_dir(run_id) / "input"
        cluster = read_cluster(_input(folder, "cluster"))
        quotas = read_quotas(_input(folder, "quotas"), float(row.options.get("quota_scale", 1.0)))
        trace = load_trace(folder / "trace.csv", cluster=cluster, skip_invalid=row.skip_invalid)
        options = EngineOptions(priorities={**DEFAULT_PRIORITIES, **row.options.get("priorities", {})},
                                elastic_fraction=float(row.options.get("elastic", 0.0)),
                                elastic_max_factor=float(row.options.get("elastic_max_factor", 1.0)))
        plan = _plan(row, quotas, options)
        progress = _progress_writer(run_id, len(plan))
        results = []
        for step, (label, pol, qs, opts) in enumerate(plan):
            results.append(run(trace, cluster, qs, pol, options=opts, progress=progress(step), label=label))
        book, catalog, priced_at = price_book(), selectors.pricing_catalog(), timezone.now()
        summaries = [{**_summary(r), "cost": replay_cost(r.segments, book, catalog, priced_at, currency())}
                     for r in results]
        comparisons = [{**compare(results[0], r), "by_flavor": compare_by_flavor(results[0], r),
                        "cost": cost_difference(summaries[0]["cost"], summary["cost"])}
                       for r, summary in zip(results[1:], summaries[1:], strict=True)]
        out = output_dir(run_id)
        text = [*(format_compare(c) for c in comparisons), format_cost(summaries, comparisons)]
        files = write_outputs(results, out, extra_text="\n\n".join(text))
        ReplayRun.objects.filter(pk=run_id).update(
            status=RunStatus.SUCCEEDED, finished_at=timezone.now(), progress=1.0, eta_seconds=0.0,
            summary=_jsonable(summaries), comparison=_jsonable(comparisons),
            files=sorted(p.name for p in files.values()),
            message=f"replayed {len(trace.jobs)} jobs under {', '.join(r.name for r in results)}")
    except Exception as exc:  # a failed run is a result to show, not a crashed worker
        logger.exception("replay run %s failed", run_id)
        why = trace_error(exc, "trace") if isinstance(exc, TraceError) else f"{type(exc).__name__}: {exc}"
        ReplayRun.objects.filter(pk=run_id).update(status=RunStatus.FAILED, finished_at=timezone.now(),
                                                   eta_seconds=None, message=why[:5000])
    return selectors.run_by_id(run_id)


def report_path(row: ReplayRun) -> Path | None:
    path = output_dir(row.pk) / "report.html"
    return path if row.status == RunStatus.SUCCEEDED and path.exists() else None
