"""Elastic jobs in trace replay (issue 29): which trace jobs run elastic, their shape, and how fast they progress.

A trace records a rigid job: it asked for S devices and ran for `duration` seconds. Replayed elastic, it is a
data-parallel job of one worker per device (a group of 1-device replicas, `ReplicaGroup.max_replicas`), that may
run on `ceil(S / 2)` to `S x max_factor` workers (at most `peak_workers`, where adding a worker stops helping).

Progress model (the same for every elastic job; docs/replay.md):
- With scaling efficiency e (each added worker keeps e of the throughput), n workers do rate(n) = n x e^(n-1)
  units of work per second. The job's work is W = duration x rate(S): what the trace's run at size S did.
- The engine counts work in seconds at the trace size, so a job at n workers advances speed(n) = rate(n) / rate(S)
  = (n / S) x e^(n - S) seconds of its recorded duration per second (exactly 1 at n = S: a rigid job's arithmetic
  is unchanged).
- Every resize (grow or shrink) costs a rescale pause without progress (the workers restart at the new world
  size); a shrink, like a preemption, also loses the work since the last checkpoint (EngineOptions.
  checkpoint_interval; none: the attempt's work).
"""

from __future__ import annotations

import hashlib
import math

# 2^64: the hash of a job id read as a fraction of it.
_SPACE = float(1 << 64)


def is_elastic(job_id: str, fraction: float) -> bool:
    """Whether a trace job is one of the `fraction` replayed elastic (see `chosen`)."""
    return chosen(job_id, fraction)


def chosen(key: str, fraction: float) -> bool:
    """Whether `key` is one of the `fraction` chosen: a hash of it below the fraction, so the same keys are chosen
    in every run (and a larger fraction keeps every key a smaller one chose)."""
    if fraction <= 0.0:
        return False
    if fraction >= 1.0:
        return True
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / _SPACE < fraction


def peak_workers(efficiency: float) -> int | None:
    """The most workers worth running: rate(n + 1) > rate(n) while (n + 1) x e > n. None: no such bound (e = 1)."""
    if efficiency >= 1.0:
        return None
    n = 1
    while (n + 1) * efficiency > n:
        n += 1
    return n


def elastic_range(size: int, max_factor: float, efficiency: float) -> tuple[int, int]:
    """(min, max) workers of a job of `size` devices: min = ceil(size / 2), max = floor(size x max_factor), never
    below its size, and never above `peak_workers` unless its size already is."""
    most = max(size, math.floor(size * max_factor))
    peak = peak_workers(efficiency)
    if peak is not None:
        most = min(most, max(size, peak))
    return math.ceil(size / 2), most


def speed(workers: int, size: int, efficiency: float) -> float:
    """Seconds of the job's recorded duration done per second at `workers`: rate(workers) / rate(size)."""
    if workers == size:
        return 1.0
    return (workers / size) * efficiency ** (workers - size)
