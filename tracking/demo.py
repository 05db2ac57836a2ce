"""Training curves for the simulated cluster's jobs, so `make run` shows live charts and alerts.

Nothing trains on a simulated cluster; every few seconds this logs, for each of its running jobs with a run, the
steps since the run's last logged step (STEPS_PER_SECOND of the job's simulated time), through the same ingestion
as a real job (`services.run_log_batch`), so anomaly detection sees them. Values are a function of the job id and
the step only: a tick's length changes how many steps are logged at once, never the curves.

Curves: train/loss decaying from ~ln(vocab) toward a floor with noise, eval/loss every EVAL_EVERY steps, train/lr
with linear warm-up then cosine decay, train/tokens_per_s, system/gpu_util and train/grad_norm. A job label injects
a failure (the seeded demo labels two jobs):
  - `sim.tidal.dev/anomaly: nan`: the gradient norm explodes, the loss climbs, then both are NaN for good;
  - `sim.tidal.dev/anomaly: throughput`: tokens/s and GPU utilisation collapse for COLLAPSE_STEPS, then recover;
  `sim.tidal.dev/anomaly-step` says at which step (default DEFAULT_ANOMALY_STEP).
Kubernetes jobs are never touched: their processes log for themselves. A run's first tick also stores a few
artifacts (its config, the first steps as CSV, a JSON summary) for the run page to list and preview.
"""

from __future__ import annotations

import io
import json
import logging
import math
import random
from datetime import datetime

from django.utils import timezone

from core.errors import DomainError
from jobs.models import Job
from jobs.states import State
from tracking import services
from tracking.artifacts import services as artifacts
from tracking.artifacts.store import StoreUnavailable
from tracking.models import Run, RunStatus

logger = logging.getLogger(__name__)

INTERVAL_SECONDS = 3.0
STEPS_PER_SECOND = 10
LOG_EVERY = 10  # a point every 10 steps, as training loops log
EVAL_EVERY = 100
MAX_LOGGED_STEPS = 1_500  # per job and tick (after a pause): ~7,700 points, under a batch's 10,000
DEFAULT_DURATION = 3_600  # seconds, for a job that declares none
ANOMALY_LABEL = "sim.tidal.dev/anomaly"
ANOMALY_STEP_LABEL = "sim.tidal.dev/anomaly-step"
DEFAULT_ANOMALY_STEP = 300
EXPLOSION_STEPS = 50  # a diverging run's gradient norm explodes this long before the loss is NaN
COLLAPSE_STEPS = 600
PEAK_LRS = (1e-4, 2e-4, 3e-4, 6e-4)
SIMULATED = "simulated"  # clusters.models.Cluster.Backend.SIMULATED (tracking does not import clusters)


def log_simulated_runs(now: datetime | None = None) -> int:
    """One tick: log the steps due for every running simulated job's run. Returns the points logged."""
    now = now or timezone.now()
    jobs = (Job.objects.filter(state=State.RUNNING, current_attempt__cluster__backend=SIMULATED,
                               current_attempt__started_at__isnull=False, run__status=RunStatus.RUNNING)
            .select_related("run", "current_attempt").order_by("pk"))
    logged = 0
    for job in jobs:
        run, started = job.run, job.current_attempt.started_at
        since = max(run.last_step_at, started) if run.last_step_at else started
        count = min(int((now - since).total_seconds() * STEPS_PER_SECOND) // LOG_EVERY, MAX_LOGGED_STEPS)
        if count <= 0:
            continue
        first = 0 if run.last_step is None else run.last_step + LOG_EVERY
        steps = range(first, first + count * LOG_EVERY, LOG_EVERY)
        total = (job.duration or DEFAULT_DURATION) * STEPS_PER_SECOND
        metrics = [{"key": key, "step": step, "value": value, "timestamp": int(now.timestamp() * 1000)}
                   for step in steps for key, value in curves(job.pk, step, total, anomaly_of(job.labels)).items()]
        try:
            logged += services.run_log_batch(run_id=run.pk, metrics=metrics,
                                             params=params(job.pk, total) if run.last_step is None else None)
        except services.RunFinished:  # the job ended between the read and the write
            continue
        if run.last_step is None:
            log_demo_artifacts(run, job.pk, total)
    return logged


def log_demo_artifacts(run: Run, seed: int, total: int) -> None:
    """What a training script saves beside its curves, so the run page has artifacts to list and preview: its
    config, a sample of its data and its evaluation summary. A store that refuses leaves the curves logged."""
    config = "".join(f"{key}: {value}\n" for key, value in params(seed, total).items())
    first = {step: curves(seed, step, total) for step in range(0, 1000, 100)}
    sample = "step,train/loss,train/lr\n" + "".join(
        f"{step},{float(point['train/loss']):.4f},{float(point['train/lr']):.3g}\n" for step, point in first.items())
    summary = json.dumps({"seed": seed, "total_steps": total, "eval": {"every": EVAL_EVERY}}, indent=2)
    for path, text in (("config.yaml", config), ("data/first-steps.csv", sample), ("eval/summary.json", summary)):
        data = text.encode()
        try:
            artifacts.artifact_put(run=run, path=path, body=artifacts.Body(io.BytesIO(data).read, len(data)))
        except (DomainError, StoreUnavailable, OSError) as error:
            logger.warning("demo artifacts of run %s not stored: %s", run.pk, error)
            return


def anomaly_of(labels: dict) -> tuple[str, int] | None:
    kind = labels.get(ANOMALY_LABEL)
    if kind not in ("nan", "throughput"):
        return None
    try:
        return kind, int(labels.get(ANOMALY_STEP_LABEL, DEFAULT_ANOMALY_STEP))
    except (TypeError, ValueError):
        return kind, DEFAULT_ANOMALY_STEP


def params(seed: int, total: int) -> dict[str, str]:
    """The hyper-parameters job `seed` "trains" with: the same per-job constants its curves are drawn from."""
    shape = random.Random(seed)
    pick = random.Random(seed + 7)
    return {"lr": str(shape.choice(PEAK_LRS)), "warmup_steps": str(warmup_steps(total)), "total_steps": str(total),
            "batch_size": str(pick.choice([32, 64, 128, 256])), "seq_len": str(pick.choice([2048, 4096, 8192])),
            "optimizer": "adamw", "weight_decay": str(pick.choice([0.0, 0.01, 0.1])), "seed": str(seed)}


def warmup_steps(total: int) -> int:
    return max(LOG_EVERY, min(2_000, total // 20))


def curves(seed: int, step: int, total: int, anomaly: tuple[str, int] | None = None) -> dict[str, float | str]:
    """The metrics job `seed` logs at `step` of `total`: per-job constants from `seed`, noise from (seed, step)."""
    shape = random.Random(seed)
    noise = random.Random(seed * 1_000_003 + step)
    peak_lr = shape.choice(PEAK_LRS)
    warmup = warmup_steps(total)
    start, floor = shape.uniform(9.5, 11.0), shape.uniform(1.6, 2.6)
    tau = total * shape.uniform(0.12, 0.25)
    tokens = shape.uniform(2e4, 2.5e5)

    if step < warmup:
        lr = peak_lr * (step + 1) / warmup
    else:
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        lr = peak_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
    decay = math.exp(-step / tau)
    loss = (floor + (start - floor) * decay) * (1 + noise.gauss(0, 0.015))
    grad_norm = (0.25 + 1.5 * math.exp(-3 * step / tau)) * math.exp(noise.gauss(0, 0.1))
    metrics: dict[str, float | str] = {
        "train/loss": loss, "train/lr": lr, "train/grad_norm": grad_norm,
        "train/tokens_per_s": tokens * (1 + noise.gauss(0, 0.03)),
        "system/gpu_util": min(100.0, noise.gauss(93, 3)),
    }
    if step % EVAL_EVERY == 0:
        metrics["eval/loss"] = (floor * 1.04 + (start - floor) * decay) * (1 + noise.gauss(0, 0.005))
    if anomaly is not None:
        _inject(metrics, step, *anomaly, noise)
    return metrics


def _inject(metrics: dict[str, float | str], step: int, kind: str, at: int, noise: random.Random) -> None:
    if step < at:
        return
    if kind == "nan":
        if step < at + EXPLOSION_STEPS:
            growth = 30 * 2 ** ((step - at) / LOG_EVERY)
            metrics["train/grad_norm"] = float(metrics["train/grad_norm"]) * growth
            metrics["train/loss"] = float(metrics["train/loss"]) * (1 + growth / 100)
        else:  # diverged: stays NaN, as a real run does
            metrics["train/loss"] = metrics["train/grad_norm"] = "NaN"
            metrics.pop("eval/loss", None)
    elif step < at + COLLAPSE_STEPS:  # a stalled input pipeline: the GPUs wait
        metrics["train/tokens_per_s"] = float(metrics["train/tokens_per_s"]) * 0.12
        metrics["system/gpu_util"] = max(0.0, noise.gauss(4, 1.5))
