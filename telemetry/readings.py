"""An attempt's per-GPU readings as the job page and the API show them: each charted field's series per GPU, cut
into at most `buckets` equal stretches of the attempt's time (the mean of each), read from the run's stored blocks
of that attempt only and its points staged for them (telemetry.store), so the charts are as fresh as the tally."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from telemetry.fields import CHARTED, key
from telemetry.models import AttemptGpu, AttemptTelemetry, StagedPoints
from telemetry.store import unpacked
from tracking.models import Series
from tracking.points import read_blocks

MAX_BUCKETS = 240


@dataclass
class Readings:
    start: int | None = None  # ms, the first bucket's start
    bucket_ms: int = 0
    # field -> GPU ordinal -> one value (or None: no reading) per bucket
    series: dict[str, dict[int, list[float | None]]] = field(default_factory=dict)


def attempt_readings(tally: AttemptTelemetry, gpus: list[AttemptGpu], buckets: int = 60,
                     fields: tuple[str, ...] = CHARTED) -> Readings:
    buckets = max(1, min(buckets, MAX_BUCKETS))
    if tally.first_at is None or tally.last_at is None or not gpus:
        return Readings()
    attempt = tally.attempt
    start = int(tally.first_at.timestamp() * 1000)
    end = int(tally.last_at.timestamp() * 1000) + 1
    width = max(1, -(-(end - start) // buckets))
    keys = {key(gpu.ordinal, name): (name, gpu.ordinal) for gpu in gpus for name in fields}
    ids = dict(Series.objects.filter(run__job_id=attempt.job_id, key__in=keys).values_list("pk", "key"))
    sums = {k: np.zeros(buckets) for k in keys}
    counts = {k: np.zeros(buckets) for k in keys}
    columns = [(ids[block.series_id], block.timestamps, block.values) for block in read_blocks(ids)
               if block.attempt == attempt.number]
    for row in StagedPoints.objects.filter(attempt_id=attempt.pk):
        columns += [(name, np.asarray(group.timestamps), np.asarray(group.values, dtype=float))
                    for name, group in unpacked(row).items() if name in keys]
    for name, timestamps, values in columns:
        where = np.clip((timestamps - start) // width, 0, buckets - 1).astype(int)
        finite = np.isfinite(values)
        np.add.at(sums[name], where[finite], values[finite])
        np.add.at(counts[name], where[finite], 1)
    out = Readings(start, width, {name: {} for name in fields})
    for series_key, (name, ordinal) in keys.items():
        total, n = sums[series_key], counts[series_key]
        out.series[name][ordinal] = [float(total[i] / n[i]) if n[i] else None for i in range(buckets)]
    return out
