"""What the production policy decides, not how fast: the Philly week at 704 GPUs, and big gangs in floods.

    .venv/bin/python bench/bench_policy.py

1. The Philly week (14,185 jobs, 11 virtual clusters, guarantees = the cluster) under the production policy: mean
   and p99 wait, preemptions, the work they threw away (GPU-hours, and its share of the trace's GPU-hours), and
   whether every virtual cluster got its guarantee (no moment with a waiting job that fit its unused guarantee
   while others held the devices), and how many never waited within it at all (whatever kept the job out: its
   own reserved head, topology).
   Beside them, the same figures before issue 11's changes.
2. Starvation: a 64-GPU gang submitted 30 minutes into a flood of 1-GPU, 1-hour jobs of its own project (one every
   30 s, filling the 64 GPUs the project is guaranteed), for 3 and 6 hours, and with a 25-hour job submitted just
   after the gang. Its bound: the last end of the jobs running when it arrived.
3. The lend hold (Policy.lend_hold, TIDAL_LEND_HOLD, 5 s by default) for each value of `--holds`, and the reclaim
   grace (Policy.reclaim_grace, TIDAL_RECLAIM_GRACE, 0 by default) for each value of `--graces`, on the Philly
   week: the figures of 1, and the seconds some VC waited below its guarantee (a job waiting for its grace is such a
   moment: with a grace, "every guarantee met" as measured above cannot hold). Not judged: the defaults are chosen
   from these tables (docs/scheduling.md).
Exits 1 when the week misses its goal (fewer preemptions and less lost work than before, the mean wait no longer
to the second, every VC's guarantee met) or a gang starts after its bound.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.collector import collector_paused  # noqa: E402
from jobs.scheduling.model import Project, Quota  # noqa: E402
from replay import QuotaSet, Trace, TraceJob, run  # noqa: E402
from replay.cluster import uniform_cluster  # noqa: E402
from replay.policies import get_policy  # noqa: E402
from replay.results import summarize  # noqa: E402
from replay.scenarios import philly_scenario  # noqa: E402

# The production policy before issue 11's changes (commit c954cc3), measured by this script's first table.
BEFORE = {"wait_mean": 284.0, "wait_p99": 3461.0, "preemptions": 130, "lost_gpu_h": 109.2}
HOUR = 3600.0
GANG_AT = 1800.0


def philly() -> bool:
    scn = philly_scenario(scale=0.25)
    c0 = time.process_time()
    with collector_paused():
        result = run(scn.trace, scn.cluster, scn.quotas, "production")
    cpu = time.process_time() - c0
    summary = summarize(result)
    o = summary["overall"]
    trace_gpu_h = sum(j.duration * j.total_devices for j in scn.trace.jobs) / HOUR
    lost_h = o["lost_work_device_s"] / HOUR
    met = sum(1 for p in summary["projects"].values() if p["guarantee_met"] == 1.0)
    met_any = sum(1 for p in summary["projects"].values() if p["guarantee_met_any"] == 1.0)
    print(f"Philly week, production policy, 704 GPUs ({cpu:.1f} CPU s)")
    print(f"{'':<34} {'now':>10} {'before':>10}")
    print(f"{'mean wait (s)':<34} {o['wait_mean']:>10.0f} {BEFORE['wait_mean']:>10.0f}")
    print(f"{'p99 wait (s)':<34} {o['wait_p99']:>10.0f} {BEFORE['wait_p99']:>10.0f}")
    print(f"{'preemptions':<34} {o['preemptions']:>10} {BEFORE['preemptions']:>10}")
    print(f"{'work lost to preemption (GPU-h)':<34} {lost_h:>10.1f} {BEFORE['lost_gpu_h']:>10.1f}")
    print(f"{'  share of the trace':<34} {lost_h / trace_gpu_h:>10.4%} {BEFORE['lost_gpu_h'] / trace_gpu_h:>10.4%}")
    vcs = len(summary["projects"])
    print(f"{'VCs whose guarantee was met':<34} {f'{met} of {vcs}':>10} {'-':>10}")
    print(f"{'  and that never waited within it':<34} {f'{met_any} of {vcs}':>10} {'-':>10}")
    fewer = o["preemptions"] < BEFORE["preemptions"] and lost_h < BEFORE["lost_gpu_h"]
    no_longer = round(o["wait_mean"]) <= BEFORE["wait_mean"]
    goal = fewer and no_longer and met == vcs
    print(f"goal (fewer preemptions, less lost work, mean wait no longer to the second, every guarantee met): "
          f"{'met' if goal else 'FAIL'}")
    return goal


def flood(hours: int, long_job: bool) -> Trace:
    jobs = [TraceJob(f"small-{k}", k * 30.0, HOUR, 1, 1, "gpu", "vision") for k in range(int(hours * HOUR / 30))]
    jobs.append(TraceJob("gang", GANG_AT, HOUR, 8, 8, "gpu", "vision"))
    if long_job:
        jobs.append(TraceJob("long", GANG_AT + 10, 25 * HOUR, 1, 1, "gpu", "vision"))
    return Trace(tuple(sorted(jobs, key=lambda j: j.submit)))


def starvation() -> bool:
    cluster = uniform_cluster(8, 8, "gpu")
    quotas = QuotaSet((Quota("vision", "gpu", 64),), (Project("vision", "acme"),))
    print("\nA 64-GPU gang among 1-GPU jobs of its own project")
    print(f"{'flood':<38} {'gang wait (s)':>14} {'bound (s)':>10}  ok")
    ok_all = True
    for hours, long_job in ((3, False), (6, False), (6, True)):
        result = run(flood(hours, long_job), cluster, quotas, "production")
        gang = next(j for j in result.jobs if j.job_id == "gang")
        bound = max(j.end for j in result.jobs if j.first_start is not None and j.first_start <= GANG_AT < j.end)
        ok = gang.first_start is not None and gang.first_start <= bound
        ok_all &= ok
        wait = "never" if gang.first_start is None else f"{gang.first_start - GANG_AT:.0f}"
        label = f"{hours} h" + (", a 25 h job right after the gang" if long_job else "")
        print(f"{label:<38} {wait:>14} {bound - GANG_AT:>10.0f}  {'ok' if ok else 'FAIL'}")
    return ok_all


def sweep(setting: str, label: str, values: list[float]) -> None:
    """The week again with one setting of the production policy changed to each value (not judged)."""
    if not values:
        return
    scn = philly_scenario(scale=0.25)
    print(f"\n{label} on the Philly week (the production policy with Policy.{setting} set)")
    print(f"{'value (s)':>9} {'preemptions':>11} {'lost GPU-h':>10} {'mean wait':>9} {'p99 wait':>8} "
          f"{'VCs met':>8} {'starved s':>9} {'CPU s':>6}")
    for value in values:
        c0 = time.process_time()
        with collector_paused():
            result = run(scn.trace, scn.cluster, scn.quotas, replace(get_policy("production"), **{setting: value}))
        cpu = time.process_time() - c0
        summary = summarize(result)
        o, projects = summary["overall"], summary["projects"].values()
        met = sum(1 for p in projects if p["guarantee_met"] == 1.0)
        print(f"{value:>9.0f} {o['preemptions']:>11} {o['lost_work_device_s'] / HOUR:>10.1f} {o['wait_mean']:>9.1f} "
              f"{o['wait_p99']:>8.0f} {f'{met} of {len(projects)}':>8} {o['starved_seconds']:>9.0f} {cpu:>6.1f}")


def values(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--holds", default="0,3,10,20",
                        help="lend hold values (seconds, comma-separated) to replay the week with; empty: none")
    parser.add_argument("--graces", default="5,30",
                        help="reclaim grace values (seconds, comma-separated) to replay the week with; empty: none")
    args = parser.parse_args()
    ok = philly() & starvation()
    sweep("lend_hold", "Lend hold", values(args.holds))
    sweep("reclaim_grace", "Reclaim grace", values(args.graces))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
