"""How right the estimated starts are: the Philly week at 704 GPUs under the production policy.

    .venv/bin/python bench/bench_eta.py [--sample 100] [--scale 0.25]

A first replay gives every job's actual start. A second, identical replay (the estimates change no decision)
asks the scheduler run forward (`jobs.scheduling.forecast`, what the scheduler loop writes as a job's ETA) for a
sample of the jobs that waited: once at the cycle of their submission, and once at the first cycle at or after 10
minutes before their actual start (replay cycles run at arrivals and completions, so that moment can be a little
later). The error is |estimate - actual start|; the trivial predictor says "it starts now" (its error is the time
left to wait). Runtimes exact (max runtime = duration), then declared at 3x (jobs still end at their duration).
As the scheduler loop does, the forecast expects a job to use the median share of its max runtime that the jobs
finished so far used (here 1.0, then 1/3: declared at exactly 3x, the learned share is exact; real overestimates
vary from job to job).
A job the forecast does not start within its simulated cycles counts as an error up to the end of the replay.
Goal (issue 11): with exact runtimes at most a quarter of the trivial predictor's error; at 3x below it. Two
more rows show where the gain at 3x comes from (planning with max runtimes, not judged) and runtimes declared
between 1x and 5x at random (judged like 3x).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from bisect import bisect_right
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.collector import collector_paused  # noqa: E402
from jobs.scheduling import CycleResult, Policy, Snapshot, forecast_steps, run_cycle  # noqa: E402
from replay.api import resolve_policy  # noqa: E402
from replay.engine import run_replay  # noqa: E402
from replay.scenarios import philly_scenario  # noqa: E402
from replay.trace import Trace  # noqa: E402

BEFORE_START = 600.0  # "10 minutes before the start"
MAX_STEPS = 5000  # simulated cycles per estimate; far more than any sampled job needs here


def estimate(snapshot: Snapshot, policy: Policy, job_id: int, first: CycleResult, ratio: float) -> float | None:
    """The forecast start of one job: the scheduler run forward until it starts."""
    for step, (at, admitted) in enumerate(forecast_steps(snapshot, policy, first, ratio)):
        if job_id in admitted:
            return at
        if step + 1 >= MAX_STEPS:
            break
    return None


class Recorder:
    """A replay cycle function that estimates the sampled jobs' starts at the two moments, then decides."""

    def __init__(self, starts: dict[int, float], sample: list[int], used: list[tuple[float, float]] | None) -> None:
        self.starts = starts
        self.used = used  # (end, share of its max runtime used) of every job, by end; None: plan with max runtimes
        self.marks = {jid: starts[jid] - BEFORE_START for jid in sample}
        self.at_submit: dict[int, tuple[float, float | None]] = {}  # job -> (when asked, estimate)
        self.before: dict[int, tuple[float, float | None]] = {}
        self.cpu = 0.0

    def __call__(self, snapshot: Snapshot, policy: Policy) -> CycleResult:
        result = run_cycle(snapshot, policy)
        pending = {j.id for j in snapshot.pending}
        admitted = {a.job_id for a in result.admits}
        for jid, mark in self.marks.items():
            if jid not in pending or jid in admitted:
                continue
            for moments, due in ((self.at_submit, True), (self.before, snapshot.now >= mark)):
                if due and jid not in moments:
                    c0 = time.process_time()
                    moments[jid] = (snapshot.now, estimate(snapshot, policy, jid, result, self.ratio(snapshot.now)))
                    self.cpu += time.process_time() - c0
        return result

    def ratio(self, now: float) -> float:
        """The median share of its max runtime used by the jobs finished by `now` (1.0 before any)."""
        if self.used is None:
            return 1.0
        done = [share for end, share in self.used[:bisect_right(self.used, (now, float("inf")))]]
        return statistics.median(done) if done else 1.0


def errors(moments: dict[int, tuple[float, float | None]], starts: dict[int, float], end: float) -> tuple:
    est = [abs((e if e is not None else end) - starts[j]) for j, (_, e) in moments.items()]
    now = [starts[j] - asked for j, (asked, _) in moments.items()]
    missing = sum(1 for _, e in moments.values() if e is None)
    return statistics.fmean(est), statistics.fmean(now), missing, len(moments)


def measure(trace: Trace, scn, sample_size: int, learn: bool) -> tuple[list[tuple[str, tuple]], float, int]:
    policy = resolve_policy("production")
    with collector_paused():
        first = run_replay(trace, scn.cluster, scn.quotas, policy)
    starts = {j.id: j.first_start for j in first.jobs if j.first_start is not None}
    waited = [j.id for j in first.jobs if j.first_start is not None and j.first_start > j.submit]
    sample = waited[:: max(1, len(waited) // sample_size)][:sample_size]
    declared = {j.job_id: j.max_runtime or j.duration for j in trace.jobs}
    used = sorted((j.end, min(j.duration, declared[j.job_id]) / declared[j.job_id]) for j in first.jobs
                  if j.end is not None and j.preemptions == 0)
    recorder = Recorder(starts, sample, used if learn else None)
    with collector_paused():
        second = run_replay(trace, scn.cluster, scn.quotas, policy, cycle=recorder)
    assert {j.id: j.first_start for j in second.jobs if j.first_start is not None} == starts, "estimates moved"
    end = max(j.end or j.first_start or 0.0 for j in second.jobs)
    return [("at submission", errors(recorder.at_submit, starts, end)),
            ("10 min before the start", errors(recorder.before, starts, end))], recorder.cpu, len(waited)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=100, help="jobs that waited, evenly spread over the week")
    ap.add_argument("--scale", type=float, default=0.25)
    args = ap.parse_args(argv)
    scn = philly_scenario(scale=args.scale)
    rnd = random.Random(11)
    tripled = Trace(tuple(replace(j, max_runtime=3 * j.duration) for j in scn.trace.jobs), scn.trace.skipped,
                    scn.trace.source)
    varied = Trace(tuple(replace(j, max_runtime=rnd.uniform(1, 5) * j.duration) for j in scn.trace.jobs),
                   scn.trace.skipped, scn.trace.source)
    print(f"{'runtimes':<27} {'moment':<24} {'jobs':>5} {'no est.':>7} {'ETA MAE s':>10} {'now MAE s':>10} "
          f"{'ratio':>6} {'goal':>6}  ok   cpu s")
    failed = False
    # (runtimes, trace, learn the share of max runtime used, goal: at most this ratio to "now", None: not judged)
    cases = (("exact", scn.trace, True, 0.25), ("3x", tripled, True, 0.99),
             ("3x, planned at max runtime", tripled, False, None), ("1x-5x", varied, True, 0.99))
    for label, trace, learn, goal in cases:
        rows, cpu, _ = measure(trace, scn, args.sample, learn)
        for moment, (eta, now, missing, n) in rows:
            ratio = eta / now if now else float("inf")
            ok = goal is None or ratio <= goal
            failed |= not ok
            verdict = "-" if goal is None else ("ok" if ok else "FAIL")
            print(f"{label:<27} {moment:<24} {n:>5} {missing:>7} {eta:>10.0f} {now:>10.0f} {ratio:>6.2f} "
                  f"{'-' if goal is None else f'{goal:.2f}':>6}  {verdict:<4} {cpu:>5.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
