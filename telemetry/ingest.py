"""The reader: DCGM (and node-level RDMA) metrics from Prometheus into the runs' system series, a bounded window at
a time.

Every TIDAL_TELEMETRY_INTERVAL seconds (Celery beat, or an embedded loop), per cluster with an enabled source, it
asks Prometheus for every per-GPU field (one query) and each node-level field (one query each) over the window
after the source's position (`read_through`), at most TIDAL_TELEMETRY_WINDOW seconds long and ending
TIDAL_TELEMETRY_DELAY seconds before now (the last scrape lands late), attributes the samples
(`telemetry.attribution`), stores them (`telemetry.store`) and moves the position to the window's end, all in one
transaction. A Prometheus that does not answer moves nothing: the next read asks
for the same window, and a reader that fell behind reads window after window (at most MAX_WINDOWS a tick) until it
has caught up, so an outage of Prometheus, of the database or of the reader loses nothing Prometheus still holds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from core.collector import collector_paused
from telemetry import attribution, prometheus, store
from telemetry.fields import NODE_FIELDS, NodeField, node_query, node_samples, query, samples
from telemetry.models import TelemetrySource

logger = logging.getLogger(__name__)

MAX_WINDOWS = 20  # windows one tick reads at most per source (catching up after an outage)


def interval() -> float:
    return float(settings.TIDAL["TELEMETRY_INTERVAL"])


@dataclass(frozen=True)
class Window:
    start: int  # Unix seconds, both ends included, multiples of the step
    end: int
    step: int


@dataclass
class Read:
    """What one read of a source did."""

    window: Window | None = None
    samples: int = 0
    points: int = 0  # written into the runs' series (with points staged by earlier reads)
    unattributed: int = 0
    error: str = ""
    # Per phase (query: Prometheus' answers, their transfer and decoding; parse: into samples; attribute; store),
    # [wall seconds, CPU seconds of this process]: where a read's time goes (bench_telemetry prints them).
    phases: dict[str, list[float]] = field(default_factory=dict)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            spent = self.phases.setdefault(phase, [0.0, 0.0])
            spent[0] += time.perf_counter() - wall
            spent[1] += time.process_time() - cpu


def next_window(read_through: datetime | None, now: datetime) -> Window | None:
    """The window after the position: from the step after it (or TIDAL_TELEMETRY_LOOKBACK back, the first time)
    to TIDAL_TELEMETRY_DELAY before now, at most TIDAL_TELEMETRY_WINDOW seconds (and Prometheus' 11,000 points);
    None when nothing new is due."""
    tidal = settings.TIDAL
    step = int(tidal["TELEMETRY_STEP"])
    limit = int(now.timestamp()) - int(tidal["TELEMETRY_DELAY"])
    first = limit - int(tidal["TELEMETRY_LOOKBACK"])
    start = first if read_through is None else int(read_through.timestamp()) + step
    start = -(-start // step) * step  # up to a multiple of the step
    span = min(int(tidal["TELEMETRY_WINDOW"]), step * (prometheus.MAX_POINTS - 1))
    end = min(start + span - step, limit) // step * step
    return Window(start, end, step) if end >= start else None


def ensure_sources() -> None:
    """Every Kubernetes cluster reads its telemetry with dcgm-exporter's default labels until staff change them."""
    have = TelemetrySource.objects.values_list("cluster_id", flat=True)
    for cluster in Cluster.objects.filter(backend=Cluster.Backend.KUBERNETES).exclude(pk__in=have):
        TelemetrySource.objects.get_or_create(cluster=cluster)


def read_all(now: datetime | None = None) -> int:
    """One tick of every enabled source (a no-op without TIDAL_PROMETHEUS_URL). Returns the points stored."""
    if not settings.TIDAL["PROMETHEUS_URL"]:
        return 0
    ensure_sources()
    stored = 0
    for source in TelemetrySource.objects.filter(enabled=True).select_related("cluster"):
        for _ in range(MAX_WINDOWS):
            read = read_source(source, now or timezone.now())
            stored += read.points
            if read.error or read.window is None:
                break
    return stored


def read_source(source: TelemetrySource, now: datetime) -> Read:
    """Read the window after the source's position; on success the position moves to its end, on failure it stays
    (the error is kept on the source for the Clusters page)."""
    window = next_window(source.read_through, now)
    if window is None:
        return Read()
    # A read of 10,000 GPUs holds about a million objects at once (the decoded answer, the samples, the batches),
    # none of them in reference cycles; the cyclic collector scanned them again and again as they were made, half
    # of the CPU of attributing and staging them. Paused for the read (its garbage is freed by reference counting).
    with collector_paused():
        return _read(source, window, now)


def _read(source: TelemetrySource, window: Window, now: datetime) -> Read:
    read = Read(window)
    try:
        with read.timed("query"):
            gpu_result, node_results = _ask(source, window)
    except prometheus.PrometheusError as exc:
        logger.warning("telemetry of cluster %s: %s; the window from %s is read again next time",
                       source.cluster.name, exc, window.start)
        TelemetrySource.objects.filter(pk=source.pk).update(last_error=str(exc)[:500], last_read_at=now)
        return Read(window, error=str(exc), phases=read.phases)
    with read.timed("parse"):
        labels = source.labels
        parsed = list(samples(gpu_result, labels))
        for node_field, result in node_results:
            parsed += node_samples(result, node_field, labels.host)
    with transaction.atomic():
        # Two reads of one source at once (a beat task still running when the next starts): the one that locks the
        # row first stores the window; the other finds the position moved and stores nothing (no tally twice).
        if not TelemetrySource.objects.select_for_update().filter(pk=source.pk,
                                                                  read_through=source.read_through).exists():
            source.refresh_from_db()
            return Read()
        with read.timed("attribute"):
            found = attribution.Attribution(source.cluster, window.start, window.end, slack=window.step)
            grouped, read.unattributed = attribution.group(found, parsed)
        read.samples = len(parsed)
        with read.timed("store"):
            read.points = store.store(found.holders, grouped, found.node_of_host, now, end=window.end,
                                      write_every=int(settings.TIDAL["TELEMETRY_WRITE_EVERY"]))
        source.read_through = datetime.fromtimestamp(window.end, tz=UTC)
        source.last_error, source.last_read_at = "", now
        source.save(update_fields=["read_through", "last_error", "last_read_at"])
    return read


def _ask(source: TelemetrySource, window: Window) -> tuple[list[dict], list[tuple[NodeField, list[dict]]]]:
    """Prometheus' matrices of the window: the per-GPU fields' and each node-level field's (none without a host
    label). One query failing fails them all: the window is read again whole."""
    tidal = settings.TIDAL

    def ask(text: str) -> list[dict]:
        return prometheus.query_range(tidal["PROMETHEUS_URL"], text, window.start, window.end, window.step,
                                      token=tidal["PROMETHEUS_TOKEN"], timeout=tidal["TELEMETRY_TIMEOUT"])

    nodes = NODE_FIELDS if source.host_label else ()
    return ask(query(source.selector)), [(f, ask(node_query(f, source.selector, source.host_label, window.step)))
                                         for f in nodes]
