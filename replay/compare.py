"""Per-project difference between two replays (the what-if page: before vs after a proposed change)."""

from __future__ import annotations

from typing import Any

from replay.engine import ReplayResult
from replay.results import summarize, summarize_by_flavor

# A project "loses" or "gains" when its mean wait moves by more than this fraction and this many seconds;
# smaller moves are noise from different placement or tie-breaks.
REL_THRESHOLD = 0.05
ABS_THRESHOLD = 60.0

KEYS = ("wait_mean", "wait_p95", "jct_mean", "never_started", "share", "guarantee_met", "preemptions",
        "starved_seconds")


def _verdict(ra: dict[str, Any], rb: dict[str, Any]) -> str:
    """B against A: "loses", "gains" or "same", judged first on jobs that never started (a job that never runs
    is worse off than any wait), then on mean wait over the started jobs."""
    never_a, never_b = ra.get("never_started") or 0, rb.get("never_started") or 0
    if never_a != never_b:
        return "loses" if never_b > never_a else "gains"
    before, after = ra.get("wait_mean"), rb.get("wait_mean")
    if before is None or after is None:
        return "same"  # no job started on one side, as many as on the other: nothing to compare
    delta = after - before
    if abs(delta) <= ABS_THRESHOLD or abs(delta) <= REL_THRESHOLD * max(before, 1.0):
        return "same"
    return "loses" if delta > 0 else "gains"


def _delta(va: float | None, vb: float | None) -> float | None:
    return None if va is None or vb is None else vb - va


def _diff(ra: dict[str, Any], rb: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for k in KEYS:
        va, vb = ra.get(k), rb.get(k)
        row[k] = {"a": va, "b": vb, "delta": _delta(va, vb)}
    row["verdict"] = _verdict(ra, rb)
    return row


def _rank(row: dict[str, Any]) -> tuple[float, float]:
    """How much worse B is for a project: jobs never started first, then mean wait."""
    return row["never_started"]["delta"] or 0, row["wait_mean"]["delta"] or 0.0


def compare(results_a: ReplayResult | dict, results_b: ReplayResult | dict) -> dict[str, Any]:
    """How B differs from A, per project and overall. Accepts results or their `summarize()` dicts.

    Returns `{"a": name, "b": name, "overall": {...}, "projects": {name: {...}}, "losers": [...],
    "gainers": [...]}` where each entry has the A and B values and B - A for wait (mean, p95, over started
    jobs), JCT (mean), jobs never started, share of the cluster, guarantee-met fraction and preemptions (None
    where a side has no value: no job started or finished), and a verdict "gains" / "loses" / "same" judged on
    jobs never started, then mean wait.
    """
    sa = results_a if isinstance(results_a, dict) else summarize(results_a)
    sb = results_b if isinstance(results_b, dict) else summarize(results_b)
    projects = {}
    for name in sorted(set(sa["projects"]) | set(sb["projects"])):
        projects[name] = _diff(sa["projects"].get(name, {}), sb["projects"].get(name, {}))
    by_rank = sorted(projects, key=lambda n: _rank(projects[n]))
    return {
        "a": sa["name"],
        "b": sb["name"],
        "overall": _diff(sa["overall"], sb["overall"]),
        "projects": projects,
        "gainers": [n for n in by_rank if projects[n]["verdict"] == "gains"],
        "losers": [n for n in reversed(by_rank) if projects[n]["verdict"] == "loses"],
    }


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


FLAVOR_KEYS = ("guarantee", "guarantee_share", "mean_devices", "share", "guarantee_met", "starved_seconds",
               "wait_mean", "wait_p95", "jct_mean", "preemptions", "jobs", "never_started")


def compare_by_flavor(results_a: ReplayResult | dict, results_b: ReplayResult | dict) -> dict[str, Any]:
    """How B differs from A per flavor and per (project, flavor). Accepts results or their
    `summarize_by_flavor()` dicts.

    Returns `{"flavors": {flavor: {"devices": n, "guarantee": {a, b, delta}, "utilization": {...}}},
    "projects": {project: {flavor: {key: {a, b, delta}, ..., "verdict": ...}}}}` with the keys of FLAVOR_KEYS;
    the verdict judges the project's jobs of that flavor by the rule of `compare()`.
    A (project, flavor) present on one side only counts as zeros on the other (a quota the change adds).
    """
    fa = results_a if isinstance(results_a, dict) else summarize_by_flavor(results_a)
    fb = results_b if isinstance(results_b, dict) else summarize_by_flavor(results_b)

    def diff(ra: dict, rb: dict, keys: tuple[str, ...]) -> dict[str, Any]:
        return {k: {"a": ra.get(k, 0.0), "b": rb.get(k, 0.0), "delta": _delta(ra.get(k, 0.0), rb.get(k, 0.0))}
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
            row["verdict"] = _verdict(pa.get(flavor, {}), pb.get(flavor, {}))
            projects.setdefault(name, {})[flavor] = row
    return {"flavors": flavors, "projects": projects}


def format_compare(cmp: dict[str, Any]) -> str:
    """A text table of compare() for the CLI."""
    lines = [f"{cmp['b']} vs {cmp['a']}: change in mean wait (s, started jobs), p95 wait, jobs never started, "
             f"share of cluster, guarantee met"]
    lines.append(f"{'project':<14}{'wait a':>10}{'wait b':>10}{'delta':>10}{'p95 d':>10}{'never d':>9}{'share d':>9}"
                 f"{'g.met b':>9}  verdict")  # fmt: skip
    rows = list(cmp["projects"].items()) + [("ALL", cmp["overall"])]
    for name, r in rows:
        lines.append(
            f"{name:<14}{_num(r['wait_mean']['a'], '.0f'):>10}{_num(r['wait_mean']['b'], '.0f'):>10}"
            f"{_num(r['wait_mean']['delta'], '+.0f'):>10}{_num(r['wait_p95']['delta'], '+.0f'):>10}"
            f"{_num(r['never_started']['delta'], '+.0f'):>9}{_num(r['share']['delta'], '+.3f'):>9}"
            f"{_num(r['guarantee_met']['b'], '.3f'):>9}  {r['verdict']}"
        )
    return "\n".join(lines)
