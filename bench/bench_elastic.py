"""Elastic jobs on the Philly week (issue 29): the same jobs rigid and with half of them elastic, side by side.

    .venv/bin/python bench/bench_elastic.py

The Philly week (14,185 jobs, 11 virtual clusters) at 704 GPUs, the production policy, checkpoints every 30 min of
work in every column (an elastic job restarts from its checkpoint at every shrink: without checkpoints a shrink
would throw its whole attempt away). Columns:
- rigid: every job as recorded;
- elastic: the jobs `replay.elastic.is_elastic(job_id, 0.5)` chooses, as one-device workers on
  ceil(size/2)..size (`manage.py replay --elastic 0.5`); a chosen 1-GPU job has nothing to resize and stays rigid;
- elastic x2: the same jobs, growing to twice their size (`--elastic-max-factor 2`; at most 9 workers, where a
  tenth stops helping at the default efficiency 0.9), so the chosen 1-GPU jobs are elastic too;
- ckpt on shrink: the elastic column with jobs that checkpoint when told to shrink (EngineOptions.
  checkpoint_on_shrink; SIGTERM first, as the Kubernetes backend shrinks), so a shrink loses no work;
- to peak: the same jobs, growing up to the size where the progress model's throughput peaks (9 workers at the
  default efficiency 0.9: `--elastic-max-factor 9`), as Pollux and Sia size a job by its speedup, not by what it
  asked for; 1-GPU jobs are elastic too.
The progress model (replay/elastic.py, docs/replay.md): n workers do n x 0.9^(n-1), each resize pauses 30 s, a shrink
loses the work since the last checkpoint.

Rows: mean and p99 job completion time (JCT), mean wait, whole-job preemptions and shrinks counted apart, whole-job
preemptions a shrink would have sufficed for (goal 0; see `ShrinkWatch`), the work preemptions and shrinks lost
(GPU-hours, counted at each job's trace size), resizes per elastic job (median and p99), time in rescale pauses,
and cluster utilisation (device-hours used / device-hours available over the makespan). The goals of issue 29
are rows of the table, "ok" or "FAIL" per column: elastic at least 25% lower mean JCT than rigid, and no whole-job
preemption a shrink would have sufficed for. Like the other benches it exits 0 either way (`make bench` runs them
all): a goal not met is a figure to read.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.collector import collector_paused  # noqa: E402
from jobs.scheduling import RunningUsage, run_cycle  # noqa: E402
from jobs.scheduling.elastic import elastic_groups  # noqa: E402
from jobs.scheduling.model import Assignment, CycleResult, Node, Policy, RunningJob, Snapshot  # noqa: E402
from replay.elastic import peak_workers  # noqa: E402
from replay.engine import EngineOptions, ReplayResult, run_replay  # noqa: E402
from replay.policies import get_policy  # noqa: E402
from replay.results import summarize  # noqa: E402
from replay.scenarios import Scenario, philly_scenario  # noqa: E402

HOUR = 3600.0
CHECKPOINT = 1800.0
SHARE = 0.5
GOAL = 0.25  # elastic mean JCT at least this much lower than rigid


class ShrinkWatch:
    """The production cycle, counting the whole-job preemptions a shrink would have sufficed for.

    A cycle's whole-job preemptions for a job J were avoidable by shrinking when J fits without them: in the state
    after the cycle's decisions (its other admissions, preemptions, shrinks and growth carried out, the jobs it
    did not admit still waiting) but with J not admitted and the jobs preempted for J still running, and then every
    running elastic job that J may shrink (its priority at most J's, J not preemptible: the core's rule) cut to its
    minimum, the same policy with preemption off admits J. With no elastic job at all this asks whether the
    preemption was needed at all."""

    def __init__(self) -> None:
        self.usage = RunningUsage()
        self.checked = 0  # preemptions checked
        self.avoidable = 0
        self.own_project = 0  # shrinks for a job of the shrunk job's own project

    def __call__(self, snapshot: Snapshot, policy: Policy) -> CycleResult:
        result = run_cycle(snapshot, policy=policy, usage=self.usage)
        by_job: dict[int, int] = {}
        for p in result.preemptions:
            if p.for_job_id is not None:  # None: a pool took its capacity back (no pools here)
                by_job[p.for_job_id] = by_job.get(p.for_job_id, 0) + 1
        if result.shrinks:
            project = {j.id: j.project for j in snapshot.pending}
            running = {r.id: r.project for r in snapshot.running}
            self.own_project += sum(1 for s in result.shrinks
                                    if s.for_job_id is not None and project.get(s.for_job_id) == running.get(s.job_id))
        for job_id, victims in by_job.items():
            self.checked += victims
            if shrink_sufficed(without(snapshot, result, job_id), policy, job_id):
                self.avoidable += victims
        return result


def _move(nodes: dict[str, Node], placement: tuple[Assignment, ...], sign: int) -> None:
    for a in placement:
        n = nodes[a.node]
        nodes[a.node] = replace(n, free=n.free + sign * a.devices)


def without(snapshot: Snapshot, result: CycleResult, job_id: int) -> Snapshot:
    """The snapshot after `result` was carried out, except that `job_id` was not admitted and the jobs preempted
    for it still run; `job_id` waits."""
    nodes: dict[str, Node] = {n.name: n for n in snapshot.nodes}
    running = {r.id: r for r in snapshot.running}
    pending = {j.id: j for j in snapshot.pending}
    for p in result.preemptions:
        if p.for_job_id != job_id:
            _move(nodes, running.pop(p.victim_id).placement, +1)
    for s in result.shrinks:
        _move(nodes, s.removed, +1)
        r = running[s.job_id]
        running[s.job_id] = replace(r, placement=tuple(a for a in r.placement if a not in s.removed))
    for a in result.admits:
        if a.job_id != job_id:
            j = pending.pop(a.job_id)
            _move(nodes, a.placement, -1)
            running[j.id] = RunningJob(j.id, j.project, j.priority, snapshot.now, a.placement, j.groups[0].flavor,
                                       j.preemptible, 0.0, j.max_runtime, elastic=elastic_groups(j))
    for g in result.grows:
        _move(nodes, g.placement, -1)
        r = running[g.job_id]
        running[g.job_id] = replace(r, placement=r.placement + g.placement)
    return replace(snapshot, nodes=tuple(nodes.values()), running=tuple(running.values()),
                   pending=tuple(pending.values()))


def shrink_sufficed(snapshot: Snapshot, policy: Policy, job_id: int) -> bool:
    """Whether `job_id`, waiting in `snapshot`, is admitted without any preemption once every elastic job it may
    shrink is at its minimum."""
    job = next((j for j in snapshot.pending if j.id == job_id), None)
    if job is None:
        return False
    nodes: dict[str, Node] = {n.name: n for n in snapshot.nodes}
    running = []
    for r in snapshot.running:
        if r.elastic and not job.preemptible and r.priority <= job.priority:
            minimum = {e.role: e.min_replicas for e in r.elastic}
            keep = tuple(a for a in r.placement if a.index < minimum.get(a.role, a.index + 1))
            _move(nodes, tuple(a for a in r.placement if a not in keep), +1)
            r = replace(r, placement=keep)
        running.append(r)
    shrunk = replace(snapshot, nodes=tuple(nodes.values()), running=tuple(running))
    return any(a.job_id == job_id for a in run_cycle(shrunk, policy=replace(policy, preemption=False)).admits)


def replay(scn: Scenario, options: EngineOptions) -> tuple[ReplayResult, ShrinkWatch, float]:
    watch = ShrinkWatch()
    c0 = time.process_time()
    with collector_paused():
        result = run_replay(scn.trace, scn.cluster, scn.quotas, get_policy("production"), policy_name="production",
                            options=options, cycle=watch)
    return result, watch, time.process_time() - c0


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    scn = philly_scenario(scale=0.25)
    base = EngineOptions(checkpoint_interval=CHECKPOINT)
    columns = (("rigid", base), ("elastic", replace(base, elastic_fraction=SHARE)),
               ("elastic x2", replace(base, elastic_fraction=SHARE, elastic_max_factor=2.0)),
               ("ckpt on shrink", replace(base, elastic_fraction=SHARE, checkpoint_on_shrink=True)),
               ("to peak", replace(base, elastic_fraction=SHARE,
                                   elastic_max_factor=float(peak_workers(base.scaling_efficiency) or 1))))
    rows: dict[str, list[str]] = {}
    order: list[str] = []

    def put(label: str, value: str) -> None:
        if label not in rows:
            rows[label] = []
            order.append(label)
        rows[label].append(value)

    rigid_mean = 0.0
    rigid_jct: dict[str, float] = {}
    cpu_total = 0.0
    for _name, options in columns:
        result, watch, cpu = replay(scn, options)
        cpu_total += cpu
        o = summarize(result)["overall"]
        elastic = [j for j in result.jobs if j.elastic]
        resizes = [float(j.grows + j.shrinks) for j in elastic]
        if not rigid_jct:
            rigid_mean = o["jct_mean"]
            rigid_jct = {j.job_id: j.jct for j in result.jobs if j.jct is not None}
        mine = [j.jct for j in elastic if j.jct is not None]
        same = [rigid_jct[j.job_id] for j in elastic if j.job_id in rigid_jct]
        put("jobs finished", f"{o['finished']} of {o['jobs']}")
        put("elastic jobs", f"{len(elastic)}")
        put("mean JCT (s)", f"{o['jct_mean']:.0f}")
        put("p99 JCT (s)", f"{o['jct_p99']:.0f}")
        put("mean wait (s)", f"{o['wait_mean']:.1f}")
        put("mean JCT of its elastic jobs (s)", f"{statistics.mean(mine):.0f}" if mine else "-")
        put("  the same jobs rigid (s)", f"{statistics.mean(same):.0f}" if same else "-")
        put("whole-job preemptions", f"{o['preemptions']}")
        put("shrinks", f"{o['shrinks']}")
        put("  for a job of the same project", f"{watch.own_project}")
        put("grows", f"{o['grows']}")
        put("preemptions a shrink sufficed for", f"{watch.avoidable} of {watch.checked}")
        put("  goal 0", "ok" if not watch.avoidable else "FAIL")
        put("lost work (GPU-h)", f"{o['lost_work_device_s'] / HOUR:.1f}")
        put("  of it by shrinks", f"{o['shrink_lost_work_device_s'] / HOUR:.1f}")
        put("resizes per elastic job, median", f"{statistics.median(resizes) if resizes else 0:.0f}")
        put("resizes per elastic job, p99", f"{percentile(resizes, 99):.0f}")
        put("rescale pauses (job-h)", f"{o['rescale_pause_s'] / HOUR:.1f}")
        put("rescale pauses (GPU-h)", f"{o['rescale_pause_device_s'] / HOUR:.1f}")
        put("utilisation (used / available)", f"{o['utilization']:.4f}")
        put("CPU s of the replay", f"{cpu:.1f}")
        lower = 1 - o["jct_mean"] / rigid_mean
        put(f"mean JCT lower than rigid (goal {GOAL:.0%})", "-" if not options.elastic_fraction else f"{lower:.1%}")
        put("  goal met", "-" if not options.elastic_fraction else "ok" if lower >= GOAL else "FAIL")
    print(f"Elastic jobs on the Philly week, production policy, 704 GPUs, checkpoints every {CHECKPOINT / 60:.0f} min "
          f"of work, {SHARE:.0%} of the jobs chosen elastic ({cpu_total:.0f} CPU s)")
    print(f"{'':<36}" + "".join(f"{name:>16}" for name, _ in columns))
    for label in order:
        print(f"{label:<36}" + "".join(f"{v:>16}" for v in rows[label]))


if __name__ == "__main__":
    main()
