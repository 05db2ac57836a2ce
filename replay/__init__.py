"""Trace replay: run recorded job history through the production scheduler core in virtual time.

Pure Python (no Django): the management command, API task and what-if page build on these functions.
"""

from replay.api import (
    cluster_for_quotas,
    load_cluster,
    load_quotas,
    load_trace,
    resolve_policy,
    run,
    run_many,
    with_quota,
)
from replay.cluster import ClusterShape, ConfigError, QuotaSet
from replay.compare import compare, format_compare
from replay.engine import EngineError, EngineOptions, JobOutcome, ReplayResult, Segment, run_replay
from replay.export import JobRecord, export_trace
from replay.policies import POLICIES, get_policy
from replay.report import format_table, write_outputs
from replay.results import summarize
from replay.trace import SkipReport, Trace, TraceError, TraceJob, read_trace, write_trace

__all__ = [
    "POLICIES", "ClusterShape", "ConfigError", "EngineError", "EngineOptions", "JobOutcome", "JobRecord",
    "QuotaSet", "ReplayResult", "Segment", "SkipReport", "Trace", "TraceError", "TraceJob", "cluster_for_quotas",
    "compare", "export_trace", "format_compare", "format_table", "get_policy", "load_cluster", "load_quotas",
    "load_trace", "read_trace", "resolve_policy", "run", "run_many", "run_replay", "summarize", "with_quota",
    "write_outputs", "write_trace",
]  # fmt: skip
