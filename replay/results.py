"""Numbers from a ReplayResult: per-job rows, aggregates overall and per project, utilization over time.

Definitions (also in docs/replay.md):
- wait = first start - submit (queueing delay), over the jobs that started; JCT = end - submit, over the jobs
  that finished. A job that never started has no wait: it is counted in `never_started` and left out of the
  wait statistics (not counted as a zero wait); one that started but did not finish is counted in
  `unfinished`. A statistic over no job at all is None ("-" in tables), not 0.
- utilization = device-seconds used / (devices x makespan), makespan = last end - first submit.
- share = a project's device-seconds / (cluster devices x makespan); guarantee share = guarantee / devices.
- starved time: moments a project had a waiting job that would fit in its unused guarantee while others held the
  devices (fewer of its flavor free than the job asks for); it should be ~0 when guarantees are honoured.
  `guarantee_met` = 1 - starved / time-waiting-under-guarantee. `guarantee_met_any` counts every moment such a job
  waited, whatever kept it out (its own project's reserved head, topology, fragmentation, others' use).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from replay.engine import JobOutcome, ReplayResult
from replay.pools import pool_summary

PERCENTILES = (50, 95, 99)


def _stats(values: list[float], prefix: str) -> dict[str, float | None]:
    """Mean and percentiles; None for each when there is no value (no job waited: not a wait of 0)."""
    if not values:
        return {f"{prefix}_mean": None, f"{prefix}_p50": None, f"{prefix}_p95": None, f"{prefix}_p99": None}
    a = np.asarray(values, dtype=float)
    out: dict[str, float | None] = {f"{prefix}_mean": float(a.mean())}
    for p, v in zip(PERCENTILES, np.percentile(a, PERCENTILES), strict=True):
        out[f"{prefix}_p{p}"] = float(v)
    return out


def _job_stats(jobs: list[JobOutcome]) -> dict[str, float | None]:
    started = [j for j in jobs if j.first_start is not None]
    finished = [j for j in started if j.end is not None]
    out: dict[str, float | None] = {
        "jobs": len(jobs),
        "started": len(started),
        "finished": len(finished),
        "unfinished": len(started) - len(finished),
        "never_started": len(jobs) - len(started),
    }
    out |= _stats([j.wait for j in started], "wait")  # type: ignore[misc]
    out |= _stats([j.jct for j in finished], "jct")  # type: ignore[misc]
    out["preemptions"] = sum(j.preemptions for j in jobs)
    out["preempted_jobs"] = sum(1 for j in jobs if j.preemptions)
    out["lost_work_device_s"] = sum(j.lost_work for j in jobs)
    out["restart_overhead_device_s"] = sum(j.overhead for j in jobs if j.preemptions)
    # Elastic jobs (EngineOptions.elastic_fraction): whole-job preemptions above, shrinks apart.
    out["elastic_jobs"] = sum(1 for j in jobs if j.elastic)
    out["grows"] = sum(j.grows for j in jobs)
    out["shrinks"] = sum(j.shrinks for j in jobs)
    out["shrink_lost_work_device_s"] = sum(j.shrink_lost_work for j in jobs)
    out["rescale_pause_s"] = sum(j.rescale_pause for j in jobs)
    out["rescale_pause_device_s"] = sum(j.rescale_pause_device_s for j in jobs)
    return out


def makespan(result: ReplayResult) -> float:
    if not result.jobs:
        return 0.0
    start = min(j.submit for j in result.jobs)
    ends = [j.end for j in result.jobs if j.end is not None]
    return (max(ends) - start) if ends else 0.0


def summarize(result: ReplayResult) -> dict[str, Any]:
    """Aggregates as plain data (JSON-ready): `overall` and `projects[name]`."""
    capacity = sum(result.capacity.values())
    span = makespan(result)
    denom = capacity * span if capacity and span else 1.0
    overall = _job_stats(result.jobs)
    used = sum(a.device_seconds for a in result.accounts.values())
    overall |= {"makespan": span, "devices": capacity, "utilization": used / denom, "cycles": result.cycles,
                "wall_seconds": result.wall_seconds}  # fmt: skip
    by_project: dict[str, list[JobOutcome]] = {}
    for j in result.jobs:
        by_project.setdefault(j.project, []).append(j)
    projects: dict[str, dict[str, float | None]] = {}
    under_total = starved_total = waited_total = 0.0
    projects_starved = 0
    for name in sorted(set(by_project) | {p for p, _ in result.accounts}):
        accs = [a for (p, _), a in result.accounts.items() if p == name]
        g = sum(a.guarantee for a in accs)
        under = sum(a.under_guarantee_seconds for a in accs)
        starved = sum(a.starved_seconds for a in accs)
        waited = sum(a.waited_within_seconds for a in accs)
        row = _job_stats(by_project.get(name, []))
        row |= {
            "guarantee": g,
            "guarantee_share": g / capacity if capacity else 0.0,
            "share": sum(a.device_seconds for a in accs) / denom,
            "mean_devices": sum(a.device_seconds for a in accs) / span if span else 0.0,
            "demand_seconds": sum(a.demand_seconds for a in accs),
            "under_guarantee_seconds": under,
            "starved_seconds": starved,
            "starved_device_s": sum(a.starved_device_seconds for a in accs),
            "longest_starved_s": max((a.longest_starved for a in accs), default=0.0),
            "guarantee_met": 1.0 - starved / under if under else 1.0,
            "waited_within_seconds": waited,
            "guarantee_met_any": 1.0 - waited / under if under else 1.0,
        }
        projects[name] = row
        under_total += under
        starved_total += starved
        waited_total += waited
        projects_starved += starved > 0
    overall |= {
        "share": overall["utilization"],
        "starved_seconds": starved_total,
        "guarantee_met": 1.0 - starved_total / under_total if under_total else 1.0,
        "guarantee_met_any": 1.0 - waited_total / under_total if under_total else 1.0,
        "projects_starved": projects_starved,
    }
    return {
        "name": result.name,
        "policy": asdict(result.policy),
        "options": {k: v for k, v in asdict(result.options).items() if k not in ("priorities", "pool")},
        "pool": pool_summary(result.options.pool, result.pool) if result.options.pool and result.pool else None,
        "skipped": result.skipped,
        "overall": overall,
        "projects": projects,
    }


def job_rows(result: ReplayResult) -> list[dict[str, Any]]:
    """One dict per job: the per-job CSV."""
    return [
        {
            "job_id": j.job_id, "project": j.project, "flavor": j.flavor, "devices": j.devices,
            "priority": j.priority, "submit": j.submit, "duration": j.duration, "first_start": j.first_start,
            "end": j.end, "wait": j.wait, "jct": j.jct, "preemptions": j.preemptions,
            "lost_work_device_s": j.lost_work, "state": j.state, "elastic": j.elastic, "grows": j.grows,
            "shrinks": j.shrinks, "rescale_pause_s": j.rescale_pause,
        }
        for j in result.jobs
    ]  # fmt: skip


def utilization_series(result: ReplayResult, bins: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """Time-weighted mean utilization (0..1) in `bins` equal slices of the makespan: (bin starts, values)."""
    capacity = sum(result.capacity.values()) or 1
    if not result.util_times:
        return np.zeros(0), np.zeros(0)
    t = np.asarray(result.util_times, dtype=float)
    u = np.asarray(result.util_used, dtype=float)
    t0 = min(j.submit for j in result.jobs)
    t1 = max(t[-1], t0 + makespan(result))
    if t1 <= t0:
        return np.array([t0]), np.array([u[-1] / capacity])
    edges = np.linspace(t0, t1, bins + 1)
    # Integral of the step function up to each edge, by cumulative sums over change points.
    seg = np.append(np.diff(t), 0.0) * u
    cum = np.concatenate(([0.0], np.cumsum(seg)))

    def integral(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(t, x, side="right") - 1
        inside = i >= 0
        val = np.zeros_like(x)
        ii = i[inside]
        val[inside] = cum[ii] + (x[inside] - t[ii]) * u[ii]
        return val

    area = np.diff(integral(edges))
    return edges[:-1], area / (np.diff(edges) * capacity)


def wait_cdf(result: ReplayResult) -> tuple[np.ndarray, np.ndarray]:
    """Sorted waits of the started jobs and their cumulative fraction of all jobs: jobs that never started
    wait forever, so they keep the curve below 1 instead of vanishing from it."""
    w = np.sort(np.asarray([j.wait for j in result.jobs if j.wait is not None], dtype=float))
    return w, (np.arange(1, len(w) + 1) / len(result.jobs)) if len(w) else np.zeros(0)


def summarize_by_flavor(result: ReplayResult) -> dict[str, Any]:
    """The figures counted in devices, per flavor and per (project, flavor), never added across flavors: a
    guarantee of 16 H100 and 8 A100 is not 24 of anything, and a share of the whole cluster hides which flavor a
    project was short of. `summarize()` keeps its per-project sums; this sits beside it.

    Returns `{"flavors": {flavor: {...}}, "projects": {project: {flavor: {...}}}}`. Per flavor: `devices` (the
    cluster's), the sum of `guarantee`s, `utilization` (device-seconds used / (devices x makespan)) and the time
    starved. Per (project, flavor): the job statistics of the project's jobs of that flavor, its `guarantee`,
    `guarantee_share` (guarantee / devices of the flavor), `share` (its device-seconds / (devices of the flavor x
    makespan)), `mean_devices`, starvation and `guarantee_met`, defined as in `summarize()`.
    """
    span = makespan(result)
    jobs: dict[tuple[str, str], list[JobOutcome]] = {}
    for j in result.jobs:
        jobs.setdefault((j.project, j.flavor), []).append(j)
    flavors: dict[str, dict[str, float]] = {}
    for flavor in sorted(set(result.capacity) | {f for _, f in result.accounts}):
        devices = result.capacity.get(flavor, 0)
        accs = [a for (_, f), a in result.accounts.items() if f == flavor]
        used = sum(a.device_seconds for a in accs)
        flavors[flavor] = {
            "devices": devices,
            "guarantee": sum(a.guarantee for a in accs),
            "utilization": used / (devices * span) if devices and span else 0.0,
            "starved_seconds": sum(a.starved_seconds for a in accs),
        }
    projects: dict[str, dict[str, dict[str, float | None]]] = {}
    for (project, flavor), acc in sorted(result.accounts.items()):
        devices = result.capacity.get(flavor, 0)
        denom = devices * span if devices and span else 1.0
        row = _job_stats(jobs.get((project, flavor), []))
        row |= {
            "guarantee": acc.guarantee,
            "guarantee_share": acc.guarantee / devices if devices else 0.0,
            "share": acc.device_seconds / denom,
            "mean_devices": acc.device_seconds / span if span else 0.0,
            "under_guarantee_seconds": acc.under_guarantee_seconds,
            "starved_seconds": acc.starved_seconds,
            "starved_device_s": acc.starved_device_seconds,
            "longest_starved_s": acc.longest_starved,
            "guarantee_met": 1.0 - acc.starved_seconds / acc.under_guarantee_seconds
            if acc.under_guarantee_seconds else 1.0,
        }
        projects.setdefault(project, {})[flavor] = row
    return {"flavors": flavors, "projects": projects}
