"""Output of replays: a text table, CSV and JSON files, PNG charts and one self-contained HTML page.

The HTML embeds the charts as base64 PNGs and inline CSS: no CDN, so it opens offline and can be attached.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: replays run in CI, Celery workers and management commands
import matplotlib.pyplot as plt  # noqa: E402

from replay.engine import ReplayResult  # noqa: E402
from replay.results import job_rows, summarize, utilization_series, wait_cdf  # noqa: E402

TABLE_COLUMNS = (
    ("jobs", "jobs", "{:.0f}"),
    ("wait_mean", "wait mean", "{:.0f}"),
    ("wait_p50", "p50", "{:.0f}"),
    ("wait_p95", "p95", "{:.0f}"),
    ("wait_p99", "p99", "{:.0f}"),
    ("jct_mean", "JCT mean", "{:.0f}"),
    ("jct_p50", "p50", "{:.0f}"),
    ("jct_p95", "p95", "{:.0f}"),
    ("jct_p99", "p99", "{:.0f}"),
    ("preemptions", "preempt", "{:.0f}"),
    ("lost_work_device_s", "lost dev-s", "{:.0f}"),
)
PROJECT_COLUMNS = (
    ("guarantee", "guar", "{:.0f}"),
    ("guarantee_share", "g.share", "{:.3f}"),
    ("share", "share", "{:.3f}"),
    ("guarantee_met", "g.met", "{:.3f}"),
    ("starved_seconds", "starved s", "{:.0f}"),
)
# Shown when a replay has elastic jobs (EngineOptions.elastic_fraction): whole-job preemptions are `preempt` above.
ELASTIC_COLUMNS = (
    ("elastic_jobs", "elastic", "{:.0f}"),
    ("shrinks", "shrinks", "{:.0f}"),
    ("grows", "grows", "{:.0f}"),
    ("rescale_pause_s", "pause s", "{:.0f}"),
)
# Jobs left out of the wait columns (which cover started jobs only); last, so the columns before keep their place.
NEVER_COLUMN = ("never_started", "never started", "{:.0f}")


def _cell(value: Any, fmt: str) -> str:
    """A formatted number, or "-" for a statistic over no job (None): an empty set is not a zero."""
    return "-" if value is None else fmt.format(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths))] + [fmt.format(*r) for r in rows])


def format_table(summaries: Sequence[dict[str, Any]], *, per_project: bool = True) -> str:
    """Overall row per policy, then (optionally) per project rows; all times in seconds."""
    cols: tuple[tuple[str, str, str], ...] = TABLE_COLUMNS
    if any(s["overall"].get("elastic_jobs") for s in summaries):
        cols = cols + ELASTIC_COLUMNS
    out = []
    header = ["policy"] + [c[1] for c in cols] + ["makespan", "util", NEVER_COLUMN[1]]
    rows = []
    for s in summaries:
        o = s["overall"]
        rows.append([s["name"]] + [_cell(o.get(k), f) for k, _, f in cols]
                    + [f"{o['makespan']:.0f}", f"{o['utilization']:.3f}", _cell(o.get(NEVER_COLUMN[0]), "{:.0f}")])
    out.append(_table(header, rows))
    if per_project:
        project_cols = cols + PROJECT_COLUMNS + (NEVER_COLUMN,)
        for s in summaries:
            header = [f"{s['name']}: project"] + [c[1] for c in project_cols]
            rows = [[name] + [_cell(p.get(k), f) for k, _, f in project_cols] for name, p in s["projects"].items()]
            out.append(_table(header, rows))
    return "\n\n".join(out)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "run"


def summary_rows(summaries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for s in summaries:
        rows.append({"policy": s["name"], "project": "ALL", **s["overall"]})
        for name, p in s["projects"].items():
            rows.append({"policy": s["name"], "project": name, **p})
    return rows


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    fields: list[str] = []
    for r in rows:
        fields.extend(k for k in r if k not in fields)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def plot_utilization(results: Sequence[ReplayResult]) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for r in results:
        t, u = utilization_series(r)
        ax.step((t - (t[0] if len(t) else 0)) / 3600, u * 100, where="post", label=r.name, linewidth=1)
    ax.set_xlabel("hours since first submit")
    ax.set_ylabel("devices in use (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Utilization over time")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def plot_wait_cdf(results: Sequence[ReplayResult]) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for r in results:
        w, f = wait_cdf(r)
        # Log x-axis: waits span seconds to days; zero waits are drawn at 1 s.
        ax.step(w.clip(min=1), f, where="post", label=r.name, linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("queueing delay (s, log)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.01)
    ax.set_title("Wait-time CDF per policy")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def _png(fig: plt.Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def render_html(results: Sequence[ReplayResult], summaries: Sequence[dict[str, Any]], charts: dict[str, bytes],
                extra: str = "") -> str:  # fmt: skip
    """One self-contained page: tables and the charts as inline base64 PNGs."""
    imgs = "".join(
        f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{base64.b64encode(png).decode()}"></figure>'
        for name, png in charts.items()
    )
    table = html.escape(format_table(summaries))
    more = f"<h2>Comparison</h2><pre>{html.escape(extra)}</pre>" if extra else ""
    names = ", ".join(html.escape(r.name) for r in results)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Tidal replay</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}pre{font-size:12px;overflow-x:auto}"
        "img{max-width:100%}</style></head><body>"
        f"<h1>Trace replay: {names}</h1>{imgs}<h2>Results (seconds)</h2><pre>{table}</pre>{more}</body></html>"
    )


def write_outputs(results: Sequence[ReplayResult], out_dir: str | Path, *, extra_text: str = "") -> dict[str, Path]:
    """Write summary.csv/.json, jobs_<policy>.csv, utilization.png, wait_cdf.png and report.html."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summaries = [summarize(r) for r in results]
    files: dict[str, Path] = {}
    files["summary_csv"] = out / "summary.csv"
    _write_csv(files["summary_csv"], summary_rows(summaries))
    files["summary_json"] = out / "summary.json"
    files["summary_json"].write_text(json.dumps(summaries, indent=2, default=str), encoding="utf-8")
    for r in results:
        path = out / f"jobs_{_slug(r.name)}.csv"
        _write_csv(path, job_rows(r))
        files[f"jobs_{r.name}"] = path
    charts = {"utilization": _png(plot_utilization(results)), "wait_cdf": _png(plot_wait_cdf(results))}
    for name, png in charts.items():
        files[name] = out / f"{name}.png"
        files[name].write_bytes(png)
    files["html"] = out / "report.html"
    files["html"].write_text(render_html(results, summaries, charts, extra_text), encoding="utf-8")
    return files
