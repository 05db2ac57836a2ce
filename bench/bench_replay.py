"""Replay benchmarks: the Philly week under the production policy and a large synthetic trace.

    .venv/bin/python bench/bench_replay.py [--synthetic-jobs 100000] [--skip-philly] [--skip-synthetic]

Each case runs in a forked child so its peak RSS is its own. Prints jobs simulated per second, wall time and
peak memory, with the target and ok/FAIL (on wall time); exits 1 when a case misses its target. The CPU time
column tells a slow machine from a busy one: on 2 shared cores other processes can double the wall time.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.collector import collector_paused  # noqa: E402
from jobs.scheduling.model import Project, Quota  # noqa: E402
from replay.api import run  # noqa: E402
from replay.cluster import QuotaSet, uniform_cluster  # noqa: E402
from replay.scenarios import philly_scenario  # noqa: E402
from replay.synthetic import synthetic_trace  # noqa: E402


def _philly(scale: float) -> dict:
    scn = philly_scenario(scale=scale)
    t0, c0 = time.perf_counter(), time.process_time()
    with collector_paused():  # as `manage.py replay` and a replay worker run it
        r = run(scn.trace, scn.cluster, scn.quotas, "production")
    return {"jobs": len(r.jobs), "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
            "cycles": r.cycles}  # fmt: skip


def _synthetic(n: int) -> dict:
    projects = 11
    cluster = uniform_cluster(88, 8, "gpu")  # 704 GPUs, as the Philly stress scenario
    share = cluster.total_devices // projects
    names = [f"proj-{i:02d}" for i in range(projects)]
    quotas = QuotaSet(
        tuple(Quota(p, "gpu", share, borrow_limit=cluster.total_devices - share) for p in names),
        tuple(Project(p, "org") for p in names),
    )
    trace = synthetic_trace(n, devices=cluster.total_devices, projects=projects, seed=1)
    t0, c0 = time.perf_counter(), time.process_time()
    with collector_paused():
        r = run(trace, cluster, quotas, "production")
    return {"jobs": len(r.jobs), "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
            "cycles": r.cycles}  # fmt: skip


def _child(fn, arg, q) -> None:  # type: ignore[no-untyped-def]
    out = fn(arg)
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    q.put(out)


def measure(fn, arg) -> dict:  # type: ignore[no-untyped-def]
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(fn, arg, q))
    p.start()
    out = q.get()
    p.join()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic-jobs", type=int, default=100_000)
    ap.add_argument("--synthetic-target", type=float, default=600.0, help="seconds allowed for the synthetic case")
    ap.add_argument("--skip-philly", action="store_true")
    ap.add_argument("--skip-synthetic", action="store_true")
    args = ap.parse_args(argv)
    cases = []
    if not args.skip_philly:
        cases.append(("philly week, production, 704 GPUs (quotas bind)", _philly, 0.25, 60.0))
        cases.append(("philly week, production, 2816 GPUs (published sizes)", _philly, 1.0, 60.0))
    if not args.skip_synthetic:
        cases.append((f"synthetic {args.synthetic_jobs} jobs, production, 704 GPUs", _synthetic,
                      args.synthetic_jobs, args.synthetic_target))  # fmt: skip
    header = (
        f"{'case':<56}{'jobs':>8}{'cycles':>8}{'wall s':>9}{'cpu s':>8}{'jobs/s':>9}{'peak MB':>9}{'target s':>9}  ok"
    )
    print(header)
    print("-" * len(header))
    failed = False
    for name, fn, arg, target in cases:
        r = measure(fn, arg)
        ok = r["wall"] < target
        failed |= not ok
        print(f"{name:<56}{r['jobs']:>8}{r['cycles']:>8}{r['wall']:>9.1f}{r['cpu']:>8.1f}{r['jobs'] / r['wall']:>9.0f}"
              f"{r['peak_mb']:>9.0f}{target:>9.0f}  {'ok' if ok else 'FAIL'}", flush=True)  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
