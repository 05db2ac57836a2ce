"""Tidal pools on the Philly week (issue 30): a serving pool beside the training cluster, four ways of lending it.

    .venv/bin/python bench/bench_pools.py [--pool-nodes 16] [--price 1.40]

The Philly week (14,185 jobs, 11 virtual clusters) at 704 GPUs, the production policy, checkpoints every 30 min of
work, and beside it a pool of `--pool-nodes` 8-GPU nodes (128 GPUs) whose serving demand follows the Alibaba GenAI
serving day (read in place from the shared traces, stretched to 24 h, each day scaled by its own factor within
±15%: replay/pools.py). The same jobs in every column: 30% of them replayed preemptible and half elastic, growing to
twice their size (`--preemptible 0.3 --elastic 0.5 --elastic-max-factor 2`): only those, and elastic growth, may run
on lent capacity. Columns, one per lending mode (`manage.py replay --pool alibaba --pool-lending MODE`):
- no lending: the pool idles whenever serving does not need it;
- schedule: everything above 8 devices from 22:00 to 08:00, whatever serving does (Volcano tdm's revocable zones);
- demand: what serving needs now plus its headroom (10%, at least 4 devices) stays unlent;
- forecast: as demand, against the most serving needed over the next 2 minutes at the same time yesterday.
Give-backs hold their devices for the victims' 30 s termination grace.

Rows: training's mean and p99 wait and mean JCT; serving's unmet demand (share of its demanded GPU-seconds);
GPU-hours lent and used by training, and the share used; the GPU-hours lent and left idle, split by what waited
meanwhile (a preemptible job, which may borrow; only jobs that may not; nothing); give-backs and their time (p50,
p99: from lending falling below what training holds to the devices free); jobs given back and the work they lost
(share of what training borrowed); whole-cluster utilisation (device-hours used, serving's included, over
device-hours available, the pool's included); what borrowing saved (GPU-hours training ran on the pool, at `--price`
per GPU-hour: an assumption, printed).
Figures are over the trace's submissions (the week). The goals of issue 30 are judged for forecast against no
lending; the bench prints FAIL beside a missed goal and exits 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.collector import collector_paused  # noqa: E402
from replay.engine import EngineOptions, ReplayResult, run_replay  # noqa: E402
from replay.paths import trace_path  # noqa: E402
from replay.policies import get_policy  # noqa: E402
from replay.pools import GENAI_FILE, LENDING_MODES, PoolSpec, alibaba_curve, pool_summary  # noqa: E402
from replay.results import summarize  # noqa: E402
from replay.scenarios import philly_scenario  # noqa: E402

CHECKPOINT = 1800.0
PREEMPTIBLE = 0.3
ELASTIC = 0.5
GOALS = {"give_back_p99_s": 60.0, "unmet_percent": 1.0, "lendable_used_percent": 60.0, "lost_percent": 5.0,
         "wait_cut": 0.30}


def replay(mode: str, nodes: int) -> tuple[ReplayResult, float]:
    scn = philly_scenario()
    pool = PoolSpec(alibaba_curve(trace_path(GENAI_FILE)), nodes=nodes, lending=mode)
    options = EngineOptions(checkpoint_interval=CHECKPOINT, preemptible_fraction=PREEMPTIBLE,
                            elastic_fraction=ELASTIC, elastic_max_factor=2.0, pool=pool)
    started = time.process_time()
    result = run_replay(scn.trace, scn.cluster, scn.quotas, get_policy("production"), policy_name=mode,
                        options=options)
    return result, time.process_time() - started


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pool-nodes", type=int, default=16)
    parser.add_argument("--price", type=float, default=1.40, help="per GPU-hour, for what borrowing saved")
    args = parser.parse_args()
    if not trace_path(GENAI_FILE).exists():
        print(f"skipped: {trace_path(GENAI_FILE)} is not here (the shared traces)")
        return
    columns: dict[str, tuple[dict, dict, float]] = {}
    with collector_paused():
        for mode in LENDING_MODES:
            result, cpu = replay(mode, args.pool_nodes)
            assert result.options.pool is not None and result.pool is not None
            columns[mode] = (summarize(result)["overall"], pool_summary(result.options.pool, result.pool), cpu)
    rows = [
        ("training mean wait (s)", lambda o, p: fmt(o["wait_mean"], 0)),
        ("training p99 wait (s)", lambda o, p: fmt(o["wait_p99"], 0)),
        ("training mean JCT (s)", lambda o, p: fmt(o["jct_mean"], 0)),
        ("serving demand unmet (%)", lambda o, p: fmt(p["unmet_percent"], 3)),
        ("GPU-hours lent", lambda o, p: fmt(p["lendable_gpu_h"], 0)),
        ("GPU-hours training used of them", lambda o, p: fmt(p["training_gpu_h"], 0)),
        ("share of lent GPU-hours used (%)", lambda o, p: fmt(p["lendable_used_percent"])),
        ("lent, idle: a preemptible job waited", lambda o, p: fmt(p["idle_borrower_waiting_gpu_h"], 0)),
        ("lent, idle: only other jobs waited", lambda o, p: fmt(p["idle_rigid_waiting_gpu_h"], 0)),
        ("lent, idle: nothing waited", lambda o, p: fmt(p["idle_nothing_waiting_gpu_h"], 0)),
        ("... an elastic job could have grown", lambda o, p: fmt(p["idle_growable_gpu_h"], 0)),
        ("give-backs", lambda o, p: str(p["give_backs"])),
        ("give-back p50 / p99 (s)", lambda o, p: f"{fmt(p['give_back_p50_s'], 0)} / {fmt(p['give_back_p99_s'], 0)}"),
        ("jobs given back", lambda o, p: str(p["jobs_given_back"])),
        ("work lost to give-backs (GPU-h)", lambda o, p: fmt(p["lost_gpu_h"])),
        ("... of what training borrowed (%)", lambda o, p: fmt(p["lost_percent"], 2)),
        ("whole-cluster utilisation (%)", lambda o, p: fmt(p["utilisation_percent"])),
        (f"saved at ${args.price:.2f}/GPU-h ($)", lambda o, p: fmt(p["training_gpu_h"] * args.price, 0)),
        ("replay CPU (s)", None),
    ]
    width = 36
    print(f"Philly week at 704 GPUs + a pool of {args.pool_nodes * 8} GPUs (Alibaba GenAI serving day), "
          f"{PREEMPTIBLE:.0%} preemptible, {ELASTIC:.0%} elastic x2, checkpoints every {CHECKPOINT / 60:.0f} min")
    print(f"{'':<{width}}" + "".join(f"{('no lending' if m == 'none' else m):>14}" for m in columns))
    for label, cell in rows:
        values = [f"{cpu:.1f}" if cell is None else cell(o, p) for o, p, cpu in columns.values()]
        print(f"{label:<{width}}" + "".join(f"{v:>14}" for v in values))
    judge(columns["none"][0], columns["forecast"][0], columns["forecast"][1], columns["none"][1])


def judge(rigid: dict, overall: dict, pool: dict, idle: dict) -> None:
    """The goals of issue 30 for lending by forecast against no lending."""
    cut = 1.0 - overall["wait_mean"] / rigid["wait_mean"] if rigid["wait_mean"] else 0.0
    checks = [
        ("give-back p99 at most 60 s", pool["give_back_p99_s"] is None or pool["give_back_p99_s"] <= GOALS[
            "give_back_p99_s"], f"{fmt(pool['give_back_p99_s'], 0)} s"),
        ("unmet serving demand at most 1%", pool["unmet_percent"] <= GOALS["unmet_percent"],
         f"{pool['unmet_percent']:.3f}%"),
        ("training uses at least 60% of lent GPU-hours", (pool["lendable_used_percent"] or 0.0) >= GOALS[
            "lendable_used_percent"], f"{fmt(pool['lendable_used_percent'])}%"),
        ("work lost at most 5% of borrowed", pool["lost_percent"] <= GOALS["lost_percent"],
         f"{pool['lost_percent']:.2f}%"),
        ("training mean wait at least 30% lower", cut >= GOALS["wait_cut"], f"{cut:.0%} lower"),
    ]
    print("\nGoals (forecast against no lending):")
    for goal, ok, value in checks:
        print(f"  {'ok  ' if ok else 'FAIL'} {goal}: {value}")
    print(f"  utilisation from {idle['utilisation_percent']:.1f}% to {pool['utilisation_percent']:.1f}%; "
          f"training ran {pool['training_gpu_h']:,.0f} GPU-hours on lent capacity")


if __name__ == "__main__":
    main()
