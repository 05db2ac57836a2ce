"""Synthetic traces for benchmarks and property tests: Poisson arrivals, log-normal durations, Philly-like sizes.

`load` sets the arrival rate so that offered work ~= load x cluster capacity; near 1.0 queues build up and
drain, which is the regime where the scheduler's per-cycle cost matters.
"""

from __future__ import annotations

import math
import random

from replay.trace import Trace, TraceJob

# (devices per replica, replicas, weight). Philly week sizes: 1 GPU 96%, 2: 1.3%, 4: 1.7%, 8: 0.7%, 16: rare.
SIZES = ((1, 1, 0.963), (2, 1, 0.0125), (4, 1, 0.017), (8, 1, 0.0073), (8, 2, 0.0002))
# One team's cluster: 1-GPU jobs and a few whole-node gangs of 32 and 64 GPUs (about a quarter of the work).
GANG_SIZES = ((1, 1, 0.9925), (8, 4, 0.005), (8, 8, 0.0025))


def synthetic_trace(
    n_jobs: int,
    *,
    devices: int,
    projects: int = 11,
    flavor: str = "gpu",
    load: float = 0.9,
    median_duration: float = 1200.0,
    sigma: float = 1.6,
    seed: int = 0,
    priorities: tuple[str, ...] = ("high", "normal", "normal", "normal", "low", "preemptible"),
    sizes: tuple[tuple[int, int, float], ...] = SIZES,
) -> Trace:
    """`n_jobs` jobs over `projects` projects (Zipf-ish popularity) for a cluster of `devices` devices.

    `priorities` is drawn from uniformly (repeat a class to weight it); `sizes` by weight (SIZES, GANG_SIZES).
    """
    rng = random.Random(seed)
    shapes = [(d, r) for d, r, _ in sizes]
    weights = [w for *_, w in sizes]
    mean_devices = sum(d * r * w for (d, r), w in zip(shapes, weights, strict=True)) / sum(weights)
    mean_duration = median_duration * math.exp(sigma**2 / 2)
    rate = load * devices / (mean_devices * mean_duration)  # arrivals per second
    names = [f"proj-{i:02d}" for i in range(projects)]
    popularity = [1.0 / (i + 1) for i in range(projects)]
    t = 0.0
    jobs = []
    for i in range(n_jobs):
        t += rng.expovariate(rate)
        d, r = rng.choices(shapes, weights)[0]
        duration = max(1.0, round(rng.lognormvariate(math.log(median_duration), sigma)))
        jobs.append(
            TraceJob(
                f"syn-{i:06d}",
                round(t, 3),
                duration,
                d,
                r,
                flavor,
                rng.choices(names, popularity)[0],
                rng.choice(priorities),
            )  # fmt: skip
        )
    return Trace(tuple(jobs), source=f"synthetic(n={n_jobs}, seed={seed})")
