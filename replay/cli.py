"""Command line: `python -m replay.cli --trace FILE --cluster FILE --quotas FILE --policy NAME ...`.

`main(argv)` is what `manage.py replay` wraps (it resolves `current` cluster/quotas from the database into files
or objects and then calls `run_cli` with them). Progress goes to stderr as a bar with an ETA, tables to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from core.collector import collector_paused
from replay.api import cluster_for_quotas, load_cluster, load_quotas, load_trace, run
from replay.cluster import ClusterShape, ConfigError, QuotaSet
from replay.compare import compare, format_compare
from replay.engine import EngineOptions, ProgressFn
from replay.paths import trace_path
from replay.policies import POLICIES
from replay.pools import GENAI_FILE, LENDING_MODES, PoolError, PoolSpec, alibaba_curve, csv_curve, format_pool
from replay.report import format_table, write_outputs
from replay.results import summarize
from replay.scenarios import is_partitioned, projects_without_quota
from replay.trace import Trace, TraceError


def progress_bar(label: str, stream: TextIO | None = None, width: int = 30) -> ProgressFn:
    """A progress callback drawing `label [####    ] 45% 6400/14185 jobs ETA 12s` on one line."""
    stream = stream or sys.stderr
    t0 = time.monotonic()
    last = [0.0]

    def report(done: int, total: int, now: float) -> None:
        wall = time.monotonic()
        if done < total and wall - last[0] < 0.2:  # redraw at most 5 times a second
            return
        last[0] = wall
        frac = done / total if total else 1.0
        elapsed = wall - t0
        eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
        bar = "#" * int(width * frac)
        eta_s = "done" if done >= total else (f"ETA {eta:.0f}s" if eta == eta else "ETA ?")
        stream.write(f"\r{label:<14} [{bar:<{width}}] {frac:4.0%} {done}/{total} jobs  "
                     f"t={now / 86400:.1f}d  {elapsed:.0f}s  {eta_s}   ")  # fmt: skip
        if done >= total:
            stream.write("\n")
        stream.flush()

    return report


def note_projects_without_partition(trace: Trace, quotas: QuotaSet, policy: str, partition: bool | None,
                                    err: TextIO) -> None:
    """Say up front which projects get no partition (they hold no quota), so "never started" is no surprise."""
    if not is_partitioned(policy, partition):
        return
    orphans = projects_without_quota(trace, quotas)
    if orphans:
        names = set(orphans)
        jobs = sum(1 for j in trace.jobs if j.project in names)
        err.write(f"{policy}: no partition for projects without a quota ({', '.join(orphans)}): "
                  f"{jobs} job{'s' if jobs != 1 else ''} will never start\n")


def _number(text: str, what: str, ok: Callable[[float], bool]) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value != value or not ok(value):  # NaN passes no comparison
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def percent(text: str) -> float:
    return _number(text, "a percent from 0 to 100", lambda v: 0.0 <= v <= 100.0)


def fraction(text: str) -> float:
    """A share of jobs, 0 to 1 (argparse names the flag in the error)."""
    return _number(text, "a share from 0 to 1", lambda v: 0.0 <= v <= 1.0)


def factor(text: str) -> float:
    return _number(text, "a factor of at least 1", lambda v: 1.0 <= v < float("inf"))


def efficiency(text: str) -> float:
    return _number(text, "above 0 and at most 1", lambda v: 0.0 < v <= 1.0)


def seconds(text: str) -> float:
    return _number(text, "seconds, at least 0", lambda v: 0.0 <= v < float("inf"))


def add_elastic_arguments(p: argparse.ArgumentParser) -> None:
    """The elastic-job flags (issue 29), shared with `manage.py replay`."""
    defaults = EngineOptions()
    p.add_argument("--elastic", type=fraction, default=0.0, metavar="FRACTION",
                   help="replay this share of the trace's jobs (chosen by a hash of the job id) elastic: one-device "
                        "workers, min = ceil(size/2), max = size; default 0 (every job rigid)")
    p.add_argument("--elastic-max-factor", type=factor, default=defaults.elastic_max_factor, metavar="F",
                   help="elastic jobs may grow to F x their size (at most where another worker stops helping)")
    p.add_argument("--scaling-efficiency", type=efficiency, default=defaults.scaling_efficiency,
                   help="throughput an elastic job keeps per added worker (default %(default)s)")
    p.add_argument("--rescale-pause", type=seconds, default=defaults.rescale_pause,
                   help="seconds an elastic job makes no progress after each resize (default %(default)s)")
    p.add_argument("--resize-cooldown", type=seconds, default=defaults.resize_cooldown,
                   help="seconds between an elastic job's resizes (default %(default)s)")


def with_elastic(options: EngineOptions, args: argparse.Namespace) -> EngineOptions:
    """`options` with the elastic flags' values."""
    return replace(options, elastic_fraction=args.elastic, elastic_max_factor=args.elastic_max_factor,
                   scaling_efficiency=args.scaling_efficiency, rescale_pause=args.rescale_pause,
                   resize_cooldown=args.resize_cooldown)


def add_pool_arguments(p: argparse.ArgumentParser) -> None:
    """The tidal pool flags (issue 30, replay/pools.py), shared with `manage.py replay`."""
    p.add_argument("--pool", metavar="FILE",
                   help="add a serving pool whose demand follows this curve: 'alibaba' (the GenAI serving day, read "
                        "in place from the shared traces) or a 't_s,demand' CSV (seconds of the day, devices)")
    p.add_argument("--pool-nodes", type=int, default=16, help="the pool's 8-device nodes (default %(default)s)")
    p.add_argument("--pool-lending", choices=LENDING_MODES, default="forecast",
                   help="what the pool lends to training (default %(default)s)")
    p.add_argument("--pool-headroom", type=percent, default=10.0,
                   help="percent of serving's demand kept unlent (at least 4 devices; default %(default)s)")
    p.add_argument("--pool-grace", type=seconds, default=30.0,
                   help="seconds a job given back keeps its devices to checkpoint (default %(default)s)")
    p.add_argument("--preemptible", type=fraction, default=0.0, metavar="FRACTION",
                   help="replay this share of the trace's jobs preemptible (chosen by a hash of the job id): "
                        "they, and elastic jobs' growth, may run on the pool")


def with_pool(options: EngineOptions, args: argparse.Namespace, node_devices: int = 8) -> EngineOptions:
    """`options` with the pool flags' values (no pool without --pool)."""
    options = replace(options, preemptible_fraction=args.preemptible)
    if not args.pool:
        return options
    if args.pool_nodes < 1:
        raise ConfigError(f"--pool-nodes must be at least 1, got {args.pool_nodes}")
    devices = args.pool_nodes * node_devices
    curve = alibaba_curve(trace_path(GENAI_FILE)) if args.pool == "alibaba" else csv_curve(Path(args.pool), devices)
    return replace(options, pool=PoolSpec(curve, nodes=args.pool_nodes, node_devices=node_devices,
                                          lending=args.pool_lending, headroom_percent=args.pool_headroom,
                                          grace=args.pool_grace))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="replay", description="Replay a job trace through the Tidal scheduler.")
    p.add_argument("--trace", required=True, help="trace CSV (replay format or a Philly CSV)")
    p.add_argument("--cluster", help="cluster shape CSV/YAML or Alibaba node list; default: sized to quotas")
    p.add_argument("--quotas", required=True, help="quota CSV/YAML or philly_vc_quota.csv")
    p.add_argument("--policy", default="production", help=f"one of {', '.join(POLICIES)}")
    p.add_argument("--compare", nargs="*", default=[], metavar="NAME", help="more policies to replay")
    p.add_argument("--skip-invalid", action="store_true", help="skip bad trace rows and count them")
    p.add_argument("--out", type=Path, help="directory for CSV, JSON, PNG and HTML results")
    p.add_argument("--quota-scale", type=float, default=1.0, help="scale of philly_vc_quota.csv node counts")
    p.add_argument("--node-devices", type=int, default=8, help="node size when the cluster is derived")
    p.add_argument(
        "--partition",
        choices=("auto", "yes", "no"),
        default="no",
        help="give each project its own nodes; auto: only the isolated baselines (reference experiment)",
    )
    p.add_argument("--cycle-interval", type=float, help="seconds between cycles (default: every event)")
    p.add_argument("--checkpoint-interval", type=float, help="seconds of work between checkpoints")
    p.add_argument("--restart-overhead", type=float, default=0.0, help="seconds lost when a job restarts")
    add_elastic_arguments(p)
    add_pool_arguments(p)
    p.add_argument("--no-progress", action="store_true")
    return p


def run_cli(
    args: argparse.Namespace,
    cluster: ClusterShape | None = None,
    quotas: QuotaSet | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run parsed arguments; `cluster`/`quotas` objects, when given, replace the files (Django's `current`)."""
    out, err = out or sys.stdout, err or sys.stderr
    if quotas is None:
        quotas = load_quotas(args.quotas, quota_scale=args.quota_scale)
    if cluster is None:
        cluster = load_cluster(args.cluster) if args.cluster else cluster_for_quotas(quotas, args.node_devices)
    trace = load_trace(args.trace, cluster=cluster, skip_invalid=args.skip_invalid)
    if trace.skipped.total:
        err.write(trace.skipped.summary() + "\n")
        for line in trace.skipped.examples[:3]:
            err.write(f"  e.g. {line}\n")
    options = with_pool(with_elastic(EngineOptions(
        cycle_interval=args.cycle_interval,
        checkpoint_interval=args.checkpoint_interval,
        restart_overhead=args.restart_overhead,
    ), args), args, args.node_devices)
    partition = {"auto": None, "yes": True, "no": False}[args.partition]
    results = []
    with collector_paused():  # a command of its own: nothing else in the process minds the pause
        for name in [args.policy, *args.compare]:
            note_projects_without_partition(trace, quotas, name, partition, err)
            bar = None if args.no_progress else progress_bar(name, err)
            results.append(run(trace, cluster, quotas, name, options=options, progress=bar, partition=partition))
    summaries = [summarize(r) for r in results]
    out.write(format_table(summaries) + "\n")
    for summary in summaries:
        if summary["pool"]:
            out.write(format_pool(summary["name"], summary["pool"]) + "\n")
    comparisons = [format_compare(compare(results[0], r)) for r in results[1:]]
    for text in comparisons:
        out.write("\n" + text + "\n")
    if args.out:
        files = write_outputs(results, args.out, extra_text="\n\n".join(comparisons))
        out.write(f"\nwrote {len(files)} files to {args.out} (report: {files['html']})\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad input, with the file and line in the message)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return run_cli(args)
    except (TraceError, ConfigError, PoolError, KeyError, FileNotFoundError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        sys.stderr.write(f"replay: error: {msg}\n")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
