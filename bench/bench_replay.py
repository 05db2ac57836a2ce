"""Replay benchmarks: the Philly week under every policy, a large synthetic trace, and a blocked backlog.

    .venv/bin/python bench/bench_replay.py [--synthetic-jobs 100000] [--backlogs 1000 3000]
        [--skip-philly] [--skip-synthetic] [--skip-backlog]

Each case runs in a forked child so its peak RSS is its own; a child that raises (or dies) is reported as an
error and the script exits 1, like a case that misses its target. Targets are on CPU seconds of the child: on 2
shared cores other processes can double the wall time, not the CPU time.

Cases:
- Philly week at 704 GPUs (the reference setup of docs/replay.md) under each policy: the isolated baselines
  on per-project partitions, pooled FIFO and production on the pooled cluster. Target: under 10 CPU s each.
- Philly week at 2,816 GPUs (published sizes), production.
- A synthetic trace (100,000 jobs by default), production, 704 GPUs.
- Blocked backlog: strict FIFO, one node of 8 GPUs; an 8-GPU job runs, an 8-GPU head waits behind it, and a
  backlog of 1-GPU jobs arrives one a second behind the head, then drains. Run for two backlog lengths: if the
  cost of a cycle did not depend on how many jobs wait behind a blocked head, CPU per cycle would be the same
  for both; "us/pending job" is CPU per cycle divided by the mean number of pending jobs a cycle saw.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import resource
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.collector import collector_paused  # noqa: E402
from jobs.scheduling import CycleResult, run_cycle  # noqa: E402
from jobs.scheduling.model import Policy, Project, Quota, Snapshot  # noqa: E402
from replay.api import run  # noqa: E402
from replay.cluster import QuotaSet, uniform_cluster  # noqa: E402
from replay.engine import run_replay  # noqa: E402
from replay.policies import POLICIES, get_policy  # noqa: E402
from replay.scenarios import philly_scenario  # noqa: E402
from replay.synthetic import synthetic_trace  # noqa: E402
from replay.trace import Trace, TraceJob  # noqa: E402

PHILLY_TARGET_CPU = 10.0
Measured = dict[str, Any]


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[[Any], Measured]
    arg: Any
    target_cpu: float | None  # None: measured, not judged


def _timed(replay: Callable[[], Any]) -> Measured:
    """Wall and CPU seconds of one replay, the garbage collector paused as `manage.py replay` pauses it."""
    t0, c0 = time.perf_counter(), time.process_time()
    with collector_paused():
        r = replay()
    return {"jobs": len(r.jobs), "cycles": r.cycles, "wall": time.perf_counter() - t0,
            "cpu": time.process_time() - c0}  # fmt: skip


def _philly(arg: tuple[float, str]) -> Measured:
    scale, policy = arg
    scn = philly_scenario(scale=scale)
    # partition=None: the isolated baselines on per-project partitions, as in the reference experiment.
    return _timed(lambda: run(scn.trace, scn.cluster, scn.quotas, policy, partition=None))


def _synthetic(n: int) -> Measured:
    projects = 11
    cluster = uniform_cluster(88, 8, "gpu")  # 704 GPUs, as the Philly stress scenario
    share = cluster.total_devices // projects
    names = [f"proj-{i:02d}" for i in range(projects)]
    quotas = QuotaSet(
        tuple(Quota(p, "gpu", share, borrow_limit=cluster.total_devices - share) for p in names),
        tuple(Project(p, "org") for p in names),
    )
    trace = synthetic_trace(n, devices=cluster.total_devices, projects=projects, seed=1)
    return _timed(lambda: run(trace, cluster, quotas, "production"))


def blocked_backlog_trace(backlog: int) -> Trace:
    """An 8-GPU job runs until the whole backlog has arrived; an 8-GPU head waits behind it (strict FIFO blocks
    the queue), and `backlog` 1-GPU jobs of 60 s arrive one a second behind the head."""
    long = backlog + 10.0
    jobs = [TraceJob("running", 0.0, long, 8, 1, "gpu", "p"), TraceJob("head", 1.0, 60.0, 8, 1, "gpu", "p")]
    jobs += [TraceJob(f"b{i:06d}", 2.0 + i, 60.0, 1, 1, "gpu", "p") for i in range(backlog)]
    return Trace(tuple(jobs), source=f"blocked-backlog({backlog})")


def _backlog(n: int) -> Measured:
    cluster = uniform_cluster(1, 8, "gpu")
    quotas = QuotaSet((Quota("p", "gpu", 8),), (Project("p", "org"),))
    seen: list[int] = []

    def counting_cycle(snapshot: Snapshot, policy: Policy) -> CycleResult:
        seen.append(len(snapshot.pending))  # an append per cycle: noise next to the cycle itself
        return run_cycle(snapshot, policy=policy)

    trace = blocked_backlog_trace(n)
    out = _timed(lambda: run_replay(trace, cluster, quotas, get_policy("strict-fifo"), policy_name="strict-fifo",
                                    cycle=counting_cycle))  # fmt: skip
    out["mean_pending"] = sum(seen) / len(seen) if seen else 0.0
    return out


def _child(fn: Callable[[Any], Measured], arg: Any, q: Any) -> None:
    try:
        out = fn(arg)
        out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    except BaseException:  # noqa: BLE001 - whatever it was, the parent must hear of it instead of waiting
        out = {"error": traceback.format_exc()}
    q.put(out)


def measure(fn: Callable[[Any], Measured], arg: Any, poll: float = 1.0) -> Measured:
    """Run `fn(arg)` in a forked child; its measurements, or {"error": text} if it raised or died."""
    ctx = mp.get_context("fork")
    q: Queue[Measured] = ctx.Queue()
    p = ctx.Process(target=_child, args=(fn, arg, q))
    p.start()
    try:
        while True:
            try:
                return q.get(timeout=poll)
            except queue.Empty:
                if p.is_alive():
                    continue
            try:  # it exited: whatever it sent before exiting is in the pipe by now
                return q.get(timeout=poll)
            except queue.Empty:
                return {"error": f"the benchmark process exited with status {p.exitcode} without a result"}
    finally:
        p.join()


def cases(args: argparse.Namespace) -> list[Case]:
    out: list[Case] = []
    if not args.skip_philly:
        for name in POLICIES:
            out.append(Case(f"philly week, {name}, 704 GPUs", _philly, (0.25, name), PHILLY_TARGET_CPU))
        out.append(Case("philly week, production, 2816 GPUs", _philly, (1.0, "production"), PHILLY_TARGET_CPU))
    if not args.skip_synthetic:
        out.append(Case(f"synthetic {args.synthetic_jobs} jobs, production, 704 GPUs", _synthetic,
                        args.synthetic_jobs, args.synthetic_target))  # fmt: skip
    if not args.skip_backlog:
        for n in args.backlogs:
            out.append(Case(f"blocked backlog {n}, strict-fifo, 8 GPUs", _backlog, n, None))
    return out


HEADER = (f"{'case':<44}{'jobs':>8}{'cycles':>8}{'wall s':>8}{'cpu s':>8}{'cpu ms/cycle':>13}{'pending/cycle':>14}"
          f"{'us/pending':>11}{'peak MB':>8}{'target':>8}  ok")  # fmt: skip


def row(case: Case, r: Measured) -> tuple[str, bool]:
    """The table line of a case and whether it passed (an error or a missed CPU target fails)."""
    if "error" in r:
        return f"{case.name:<44}  ERROR (traceback on stderr)", False
    per_cycle = r["cpu"] / r["cycles"] * 1000 if r["cycles"] else 0.0
    pending = r.get("mean_pending")
    per_job = f"{per_cycle * 1000 / pending:>11.1f}" if pending else f"{'-':>11}"
    ok = case.target_cpu is None or r["cpu"] < case.target_cpu
    verdict = "-" if case.target_cpu is None else ("ok" if ok else "FAIL")
    target = "-" if case.target_cpu is None else f"{case.target_cpu:.0f} cpu"
    line = (f"{case.name:<44}{r['jobs']:>8}{r['cycles']:>8}{r['wall']:>8.1f}{r['cpu']:>8.1f}{per_cycle:>13.2f}"
            f"{(f'{pending:.0f}' if pending else '-'):>14}{per_job}{r['peak_mb']:>8.0f}{target:>8}  {verdict}")
    return line, ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic-jobs", type=int, default=100_000)
    ap.add_argument("--synthetic-target", type=float, default=600.0, help="CPU seconds allowed for the synthetic case")
    ap.add_argument("--backlogs", type=int, nargs=2, default=[1000, 3000], metavar=("SHORT", "LONG"),
                    help="the two backlog lengths of the blocked-backlog case")
    ap.add_argument("--skip-philly", action="store_true")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--skip-backlog", action="store_true")
    args = ap.parse_args(argv)
    print(HEADER)
    print("-" * len(HEADER))
    failed = False
    for case in cases(args):
        r = measure(case.fn, case.arg)
        line, ok = row(case, r)
        failed |= not ok
        print(line, flush=True)
        if "error" in r:
            sys.stderr.write(f"{case.name}:\n{r['error']}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
