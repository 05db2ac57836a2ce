"""`manage.py replay`: replay a trace through the scheduler core, with `current` cluster/quotas from the database.

Wraps `replay.cli.run_cli` (same options, tables and files as `python -m replay.cli`); the progress bar and ETA
go to stderr. Bad input exits with status 2 naming the file and line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from replay import ConfigError, TraceError
from replay.cli import add_elastic_arguments, add_pool_arguments, run_cli
from replay.policies import POLICIES
from replay.pools import PoolError
from replays import selectors, services


class Command(BaseCommand):
    help = "Replay a job trace through the Tidal scheduler core (virtual time, simulated cluster)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--trace", required=True, help="trace CSV (replay format or a Philly CSV)")
        parser.add_argument("--cluster", default="current",
                            help="cluster shape CSV/YAML or Alibaba node list, or `current` (the inventory)")
        parser.add_argument("--quotas", default="current",
                            help="quota CSV/YAML or philly_vc_quota.csv, or `current` (the configured quotas)")
        parser.add_argument("--policy", default="production", help=f"one of {', '.join(POLICIES)}")
        parser.add_argument("--compare", nargs="*", default=[], metavar="NAME", help="more policies to replay")
        parser.add_argument("--skip-invalid", action="store_true", help="skip bad trace rows and count them")
        parser.add_argument("--out", type=Path, help="directory for CSV, JSON, PNG and HTML results")
        parser.add_argument("--quota-scale", type=float, default=1.0, help="scale of philly_vc_quota.csv nodes")
        parser.add_argument("--node-devices", type=int, default=8, help="node size when the cluster is derived")
        parser.add_argument("--partition", choices=("auto", "yes", "no"), default="no",
                            help="give each project its own nodes; auto: only the isolated baselines")
        parser.add_argument("--cycle-interval", type=float, help="seconds between cycles (default: every event)")
        parser.add_argument("--checkpoint-interval", type=float, help="seconds of work between checkpoints")
        parser.add_argument("--restart-overhead", type=float, default=0.0, help="seconds lost when a job restarts")
        add_elastic_arguments(parser)
        add_pool_arguments(parser)
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options) -> None:
        keys = ("trace", "cluster", "quotas", "policy", "compare", "skip_invalid", "out", "quota_scale",
                "node_devices", "partition", "cycle_interval", "checkpoint_interval", "restart_overhead",
                "elastic", "elastic_max_factor", "scaling_efficiency", "rescale_pause", "resize_cooldown",
                "pool", "pool_nodes", "pool_lending", "pool_headroom", "pool_grace", "preemptible", "no_progress")
        ns = argparse.Namespace(**{k: options[k] for k in keys})
        out, err = self.stdout._out, self.stderr._out  # raw streams: the progress bar redraws one line with \r
        try:
            cluster = services.current_cluster() if ns.cluster == "current" else None
            quotas = selectors.current_quotas() if ns.quotas == "current" else None
            status = run_cli(ns, cluster=cluster, quotas=quotas, out=out, err=err)
        except DomainError as exc:
            raise CommandError(exc.message, returncode=2) from None
        except (TraceError, ConfigError, PoolError, KeyError, FileNotFoundError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise CommandError(str(msg), returncode=2) from None
        if status:
            raise CommandError(f"replay exited with status {status}", returncode=status)
