"""Per-project difference between two replays (the what-if page: before vs after a proposed change)."""

from __future__ import annotations

from typing import Any

from replay.engine import ReplayResult
from replay.results import summarize, summarize_by_flavor

# A project "loses" or "gains" when its mean wait moves by more than this fraction and this many seconds;
# smaller moves are noise from different placement or tie-breaks.
REL_THRESHOLD = 0.05
ABS_THRESHOLD = 60.0


def _verdict(before: float, after: float) -> str:
    delta = after - before
    if abs(delta) <= ABS_THRESHOLD or abs(delta) <= REL_THRESHOLD * max(before, 1.0):
        return "same"
    return "loses" if delta > 0 else "gains"


def compare(results_a: ReplayResult | dict, results_b: ReplayResult | dict) -> dict[str, Any]:
    """How B differs from A, per project and overall. Accepts results or their `summarize()` dicts.

    Returns `{"a": name, "b": name, "overall": {...}, "projects": {name: {...}}, "losers": [...],
    "gainers": [...]}` where each entry has the A and B values and B - A for wait (mean, p95), JCT (mean),
    share of the cluster, guarantee-met fraction and preemptions, and a verdict "gains" / "loses" / "same"
    judged on mean wait.
    """
    sa = results_a if isinstance(results_a, dict) else summarize(results_a)
    sb = results_b if isinstance(results_b, dict) else summarize(results_b)
    keys = ("wait_mean", "wait_p95", "jct_mean", "share", "guarantee_met", "preemptions", "starved_seconds")

    def diff(ra: dict, rb: dict) -> dict[str, Any]:
        row: dict[str, Any] = {}
        for k in keys:
            va, vb = ra.get(k, 0.0), rb.get(k, 0.0)
            row[k] = {"a": va, "b": vb, "delta": vb - va}
        row["verdict"] = _verdict(ra.get("wait_mean", 0.0), rb.get("wait_mean", 0.0))
        return row

    projects = {}
    for name in sorted(set(sa["projects"]) | set(sb["projects"])):
        projects[name] = diff(sa["projects"].get(name, {}), sb["projects"].get(name, {}))
    by_delta = sorted(projects, key=lambda n: projects[n]["wait_mean"]["delta"])
    return {
        "a": sa["name"],
        "b": sb["name"],
        "overall": diff(sa["overall"], sb["overall"]),
        "projects": projects,
        "gainers": [n for n in by_delta if projects[n]["verdict"] == "gains"],
        "losers": [n for n in reversed(by_delta) if projects[n]["verdict"] == "loses"],
    }


FLAVOR_KEYS = ("guarantee", "guarantee_share", "mean_devices", "share", "guarantee_met", "starved_seconds",
               "wait_mean", "wait_p95", "jct_mean", "preemptions", "jobs")


def compare_by_flavor(results_a: ReplayResult | dict, results_b: ReplayResult | dict) -> dict[str, Any]:
    """How B differs from A per flavor and per (project, flavor). Accepts results or their
    `summarize_by_flavor()` dicts.

    Returns `{"flavors": {flavor: {"devices": n, "guarantee": {a, b, delta}, "utilization": {...}}},
    "projects": {project: {flavor: {key: {a, b, delta}, ..., "verdict": ...}}}}` with the keys of FLAVOR_KEYS;
    the verdict judges the mean wait of the project's jobs of that flavor, with the thresholds of `compare()`.
    A (project, flavor) present on one side only counts as zeros on the other (a quota the change adds).
    """
    fa = results_a if isinstance(results_a, dict) else summarize_by_flavor(results_a)
    fb = results_b if isinstance(results_b, dict) else summarize_by_flavor(results_b)

    def diff(ra: dict, rb: dict, keys: tuple[str, ...]) -> dict[str, Any]:
        return {k: {"a": ra.get(k, 0.0), "b": rb.get(k, 0.0), "delta": rb.get(k, 0.0) - ra.get(k, 0.0)}
                for k in keys}

    flavors = {}
    for flavor in sorted(set(fa["flavors"]) | set(fb["flavors"])):
        ra, rb = fa["flavors"].get(flavor, {}), fb["flavors"].get(flavor, {})
        flavors[flavor] = {"devices": rb.get("devices", ra.get("devices", 0)),
                           **diff(ra, rb, ("guarantee", "utilization", "starved_seconds"))}
    projects: dict[str, dict[str, Any]] = {}
    for name in sorted(set(fa["projects"]) | set(fb["projects"])):
        pa, pb = fa["projects"].get(name, {}), fb["projects"].get(name, {})
        for flavor in sorted(set(pa) | set(pb)):
            row = diff(pa.get(flavor, {}), pb.get(flavor, {}), FLAVOR_KEYS)
            row["verdict"] = _verdict(row["wait_mean"]["a"], row["wait_mean"]["b"])
            projects.setdefault(name, {})[flavor] = row
    return {"flavors": flavors, "projects": projects}


def format_compare(cmp: dict[str, Any]) -> str:
    """A text table of compare() for the CLI."""
    lines = [f"{cmp['b']} vs {cmp['a']}: change in mean wait (s), p95 wait, share of cluster, guarantee met"]
    lines.append(f"{'project':<14}{'wait a':>10}{'wait b':>10}{'delta':>10}{'p95 d':>10}{'share d':>9}"
                 f"{'g.met b':>9}  verdict")  # fmt: skip
    rows = list(cmp["projects"].items()) + [("ALL", cmp["overall"])]
    for name, r in rows:
        lines.append(
            f"{name:<14}{r['wait_mean']['a']:>10.0f}{r['wait_mean']['b']:>10.0f}{r['wait_mean']['delta']:>+10.0f}"
            f"{r['wait_p95']['delta']:>+10.0f}{r['share']['delta']:>+9.3f}{r['guarantee_met']['b']:>9.3f}"
            f"  {r['verdict']}"
        )
    return "\n".join(lines)
