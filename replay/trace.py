"""The replay trace format: one CSV row per job, read with line-numbered validation.

Columns (header required, order free, unknown columns ignored, lines starting with `#` are comments):

    job_id, submit_s, duration_s, devices_per_replica, replicas, total_devices, flavor, project,
    priority, user, max_runtime_s

Either `devices_per_replica` + `replicas` (+ optional `remainder_devices`) or `total_devices` must be given.
`total_devices` is split the way the reference simulators place a job: up to one node's worth is a single
replica, more is replicas of a whole node each plus, when the total is not a multiple of the node size, one
smaller replica of the rest (12 devices on 8-device nodes: 1 x 8 + 1 x 4).
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from core.streams import TextSink

PRIORITY_CLASSES = ("high", "normal", "low", "preemptible")

COLUMNS = (
    "job_id",
    "submit_s",
    "duration_s",
    "devices_per_replica",
    "replicas",
    "total_devices",
    "flavor",
    "project",
    "priority",
    "user",
    "max_runtime_s",
    "remainder_devices",
)

DEFAULT_NODE_DEVICES = 8


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job as recorded: what it asked for and how long it really ran."""

    job_id: str
    submit: float  # seconds from the trace origin
    duration: float  # seconds of work the job needs when it runs uninterrupted
    devices: int  # per replica
    replicas: int
    flavor: str
    project: str
    priority: str = "normal"
    user: str = ""
    max_runtime: float | None = None  # declared limit; replay uses `duration` when absent
    # Devices of one more, smaller replica: a job that is not a whole number of nodes (12 GPUs on 8-GPU nodes is
    # 1 x 8 + 1 x 4). 0: every replica has `devices`.
    remainder: int = 0

    @property
    def total_devices(self) -> int:
        return self.devices * self.replicas + self.remainder


def split_total(total: int, node: int) -> tuple[int, int, int]:
    """(devices per replica, replicas, remainder) of a job asking `total` devices on nodes of `node`.

    Up to a node is one replica; more is whole nodes plus one replica of the rest, as the reference simulators
    place it (whole free nodes, then one best-fit node for the remainder).
    """
    if total <= node:
        return total, 1, 0
    return node, total // node, total % node


class TraceError(ValueError):
    """A bad row: names the file, the 1-based line number and a stable reason code."""

    def __init__(self, source: str, line: int, reason: str, message: str) -> None:
        self.source, self.line, self.reason = source, line, reason
        super().__init__(f"{source} line {line}: {message} [{reason}]")


@dataclass
class SkipReport:
    """What `skip_invalid=True` dropped: counts by reason, and the first few errors to show a person."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, err: TraceError) -> None:
        self.counts[err.reason] += 1
        if len(self.examples) < 10:
            self.examples.append(str(err))

    def summary(self) -> str:
        if not self.counts:
            return "no rows skipped"
        parts = ", ".join(f"{reason}: {n}" for reason, n in sorted(self.counts.items()))
        return f"skipped {self.total} rows ({parts})"


@dataclass(frozen=True)
class Trace:
    jobs: tuple[TraceJob, ...]
    skipped: SkipReport = field(default_factory=SkipReport)
    source: str = "<trace>"

    def __len__(self) -> int:
        return len(self.jobs)


@dataclass(frozen=True)
class FlavorLimits:
    """What validation needs to know about the cluster: per flavor, the node size and the total."""

    node_devices: dict[str, int]  # largest node of the flavor
    total_devices: dict[str, int]


def _num(value: str, name: str, src: str, line: int, *, integer: bool = False) -> float:
    try:
        x = float(value)
    except ValueError:
        raise TraceError(src, line, "malformed", f"{name} is not a number: {value!r}") from None
    if math.isnan(x) or math.isinf(x):
        raise TraceError(src, line, "malformed", f"{name} is not a finite number: {value!r}")
    if integer and x != int(x):
        raise TraceError(src, line, "malformed", f"{name} must be a whole number: {value!r}")
    return x


def parse_row(row: dict[str, str], src: str, line: int, limits: FlavorLimits | None) -> TraceJob:
    """Turn one CSV row into a TraceJob or raise TraceError naming the line."""

    def get(name: str) -> str:
        return (row.get(name) or "").strip()

    for required in ("submit_s", "duration_s", "flavor", "project"):
        if not get(required):
            raise TraceError(src, line, "malformed", f"missing {required}")
    submit = _num(get("submit_s"), "submit_s", src, line)
    if submit < 0:
        raise TraceError(src, line, "negative_submit", f"negative submit_s {submit:g}")
    duration = _num(get("duration_s"), "duration_s", src, line)
    if duration < 0:
        raise TraceError(src, line, "negative_duration", f"negative duration_s {duration:g}")
    flavor, project = get("flavor"), get("project")
    if limits is not None and flavor not in limits.node_devices:
        known = ", ".join(sorted(limits.node_devices))
        raise TraceError(src, line, "unknown_flavor", f"unknown flavor {flavor!r} (cluster has {known})")
    node = limits.node_devices[flavor] if limits is not None else DEFAULT_NODE_DEVICES

    if get("devices_per_replica") or get("replicas") or get("remainder_devices"):
        devices = int(_num(get("devices_per_replica") or "0", "devices_per_replica", src, line, integer=True))
        replicas = int(_num(get("replicas") or "1", "replicas", src, line, integer=True))
        remainder = int(_num(get("remainder_devices") or "0", "remainder_devices", src, line, integer=True))
        if remainder < 0 or (remainder and remainder >= devices):
            # One smaller replica: as large or larger, it would be one more replica of the main group.
            raise TraceError(src, line, "malformed",
                             f"remainder_devices {remainder} must be from 0 to below devices_per_replica {devices}")
        given = get("total_devices")
        if given and int(_num(given, "total_devices", src, line)) != devices * replicas + remainder:
            rest = f" + {remainder}" if remainder else ""
            raise TraceError(src, line, "malformed", f"total_devices {given} != {devices} x {replicas} replicas{rest}")
    elif get("total_devices"):
        total = int(_num(get("total_devices"), "total_devices", src, line, integer=True))
        devices, replicas, remainder = split_total(total, node)
    else:
        raise TraceError(src, line, "malformed", "give devices_per_replica and replicas, or total_devices")
    if devices <= 0 or replicas <= 0:
        raise TraceError(src, line, "malformed", f"devices {devices} x replicas {replicas} must be positive")
    if limits is not None:
        if devices > node:
            raise TraceError(src, line, "too_large", f"{devices} devices per replica but {flavor} nodes have {node}")
        total = devices * replicas + remainder
        if total > limits.total_devices[flavor]:
            raise TraceError(
                src,
                line,
                "too_large",
                f"{total} devices but the cluster has {limits.total_devices[flavor]} {flavor}",
            )
    priority = get("priority") or "normal"
    if priority not in PRIORITY_CLASSES:
        raise TraceError(src, line, "unknown_priority", f"priority {priority!r} is not one of {PRIORITY_CLASSES}")
    max_runtime = None
    if get("max_runtime_s"):
        max_runtime = _num(get("max_runtime_s"), "max_runtime_s", src, line)
        if max_runtime <= 0:
            raise TraceError(src, line, "malformed", f"max_runtime_s must be positive, got {max_runtime:g}")
    return TraceJob(
        job_id=get("job_id") or f"line-{line}",
        submit=submit,
        duration=duration,
        devices=devices,
        replicas=replicas,
        flavor=flavor,
        project=project,
        priority=priority,
        user=get("user"),
        max_runtime=max_runtime,
        remainder=remainder,
    )


def _numbered_rows(f: TextIO) -> Iterator[tuple[int, list[str]]]:
    # csv.reader's line_num counts physical lines, so quoted newlines keep the number a person sees.
    reader = csv.reader(f)
    for fields in reader:
        if not fields or (fields[0].lstrip().startswith("#")):
            continue
        yield reader.line_num, fields


def read_trace(
    source: str | Path | TextIO,
    *,
    limits: FlavorLimits | None = None,
    skip_invalid: bool = False,
) -> Trace:
    """Read a trace CSV. Raises TraceError at the first bad row unless `skip_invalid`, which counts them.

    `limits` (from `ClusterShape.limits()`) enables the checks that need the cluster: unknown flavors and jobs
    larger than a node or the whole flavor. Jobs are returned sorted by submit time (stable), ids kept.
    """
    if isinstance(source, str | Path):
        name = str(source)
        with open(source, newline="", encoding="utf-8") as f:
            return _read(f, name, limits, skip_invalid)
    return _read(source, getattr(source, "name", "<trace>"), limits, skip_invalid)


def _read(f: TextIO, src: str, limits: FlavorLimits | None, skip_invalid: bool) -> Trace:
    rows = _numbered_rows(f)
    try:
        header_line, header = next(rows)
    except StopIteration:
        raise TraceError(src, 1, "malformed", "empty file, expected a header row") from None
    header = [h.strip() for h in header]
    missing = {"submit_s", "duration_s", "flavor", "project"} - set(header)
    if missing:
        raise TraceError(src, header_line, "malformed", f"header lacks columns {sorted(missing)}")
    jobs: list[TraceJob] = []
    skipped = SkipReport()
    seen: set[str] = set()
    line = header_line
    for line, fields in rows:
        try:
            if len(fields) != len(header):
                raise TraceError(src, line, "malformed", f"{len(fields)} fields, header has {len(header)}")
            job = parse_row(dict(zip(header, fields, strict=True)), src, line, limits)
            if job.job_id in seen:
                raise TraceError(src, line, "duplicate_id", f"job_id {job.job_id!r} appears twice")
        except TraceError as err:
            if not skip_invalid:
                raise
            skipped.add(err)
            continue
        seen.add(job.job_id)
        jobs.append(job)
    require_jobs(jobs, skipped, src, line)
    jobs.sort(key=lambda j: j.submit)
    return Trace(tuple(jobs), skipped, src)


def require_jobs(jobs: list[TraceJob], skipped: SkipReport, src: str, last_line: int) -> None:
    """A trace without a single job is bad input, not an empty replay: a run of nothing would print a table of
    zeros and exit 0, hiding a wrong file, a truncated export or a filter that dropped every row."""
    if jobs:
        return
    if skipped.total:
        raise TraceError(src, last_line, "no_jobs", f"no valid job rows ({skipped.summary()})")
    raise TraceError(src, last_line, "no_jobs", "no job rows after the header")


def _fmt(x: float | None) -> str:
    if x is None:
        return ""
    return str(int(x)) if x == int(x) else repr(x)


def write_trace(jobs: Iterable[TraceJob], dest: str | Path | TextSink) -> int:
    """Write jobs in the trace format; returns the number of rows."""
    if isinstance(dest, str | Path):
        with open(dest, "w", newline="", encoding="utf-8") as f:
            return write_trace(jobs, f)
    w = csv.writer(dest, lineterminator="\n")
    w.writerow(COLUMNS)
    n = 0
    for j in jobs:
        w.writerow(
            [
                j.job_id, _fmt(j.submit), _fmt(j.duration), j.devices, j.replicas, j.total_devices,
                j.flavor, j.project, j.priority, j.user, _fmt(j.max_runtime), j.remainder or "",
            ]
        )  # fmt: skip
        n += 1
    return n


def trace_from_text(text: str, **kwargs: object) -> Trace:
    """Convenience for tests and the API: parse CSV text held in memory."""
    return read_trace(io.StringIO(text), **kwargs)  # type: ignore[arg-type]
