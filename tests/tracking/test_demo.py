"""The demo curves: logged for running simulated jobs only, steps following the clock, an injected NaN alerting."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from clusters.models import Cluster
from jobs.models import Attempt
from tests.jobs.conftest import inventory, run, submit  # noqa: F401  (fixtures)
from tracking import demo
from tracking.models import Alert, Run
from tracking.points import stored_points
from tracking.selectors import full_series
from tracking.series import anomaly

pytestmark = pytest.mark.django_db


def started_ago(job, seconds: float) -> datetime:
    started = timezone.now() - timedelta(seconds=seconds)
    Attempt.objects.filter(pk=job.current_attempt_id).update(started_at=started)
    return started


def steps(run_obj: Run, key: str = "train/loss") -> list[int]:
    return sorted(p.step for p in stored_points(run_obj.pk) if p.key == key)


def test_a_running_simulated_job_gets_increasing_steps_as_time_passes(tenant, inventory):  # noqa: F811
    job = run(submit(tenant, inventory["h100"], duration=600), inventory["cluster"], ["r1-n1"])
    started = started_ago(job, 30)
    assert demo.log_simulated_runs(now=started + timedelta(seconds=30.5)) > 0
    job_run = Run.objects.get(job=job)
    first = steps(job_run)
    assert first == list(range(0, 300, demo.LOG_EVERY))  # 30 s at 10 steps/s, a point every 10 steps
    assert set(job_run.summary) == {"train/loss", "eval/loss", "train/lr", "train/grad_norm", "train/tokens_per_s",
                                    "system/gpu_util"}
    job_run.refresh_from_db()
    peak = max(v for _, v in full_series(job_run, "train/lr"))
    assert float(job_run.params["lr"]) >= peak > 0 and job_run.params["optimizer"] == "adamw"  # the curves' own lr
    demo.log_simulated_runs(now=timezone.now() + timedelta(seconds=10))
    second = steps(job_run)
    assert second[:len(first)] == first and len(second) == len(first) + 10 and second == sorted(set(second))
    assert not Alert.objects.exists()  # clean curves
    # Its first tick stored a few artifacts, once.
    assert sorted(job_run.artifacts.values_list("path", flat=True)) == ["config.yaml", "data/first-steps.csv",
                                                                        "eval/summary.json"]
    config = read_artifact(job_run, "config.yaml").decode()
    assert f"lr: {job_run.params['lr']}\n" in config and "optimizer: adamw\n" in config


def read_artifact(run_obj: Run, path: str) -> bytes:
    from tracking.artifacts import services

    with services.read(run_obj, run_obj.artifacts.get(path=path)) as file:
        return file.read()


def test_a_kubernetes_job_gets_nothing(tenant, inventory):  # noqa: F811
    kube = Cluster.objects.create(name="kube", backend=Cluster.Backend.KUBERNETES)
    job = run(submit(tenant, inventory["h100"], duration=600), kube, ["r1-n1"])
    started_ago(job, 60)
    assert demo.log_simulated_runs() == 0
    assert not [point for found in Run.objects.filter(job=job) for point in stored_points(found.pk)]
    assert not Run.objects.filter(job=job, artifacts__isnull=False).exists()


def test_an_injected_nan_opens_alerts_at_its_step(tenant, inventory):  # noqa: F811
    labels = {demo.ANOMALY_LABEL: "nan", demo.ANOMALY_STEP_LABEL: "250"}
    job = run(submit(tenant, inventory["h100"], duration=600, labels=labels), inventory["cluster"], ["r1-n1"])
    started_ago(job, 40)
    demo.log_simulated_runs()
    rules = dict(Alert.objects.filter(run__job=job).values_list("rule", "step"))
    assert rules["grad_norm_explosion"] == 250
    assert rules["non_finite"] == 250 + demo.EXPLOSION_STEPS


def test_a_throughput_collapse_opens_and_resolves():
    points = [(step, demo.curves(7, step, 6000, ("throughput", 300))) for step in range(0, 1500, demo.LOG_EVERY)]
    state: dict = {}
    events, state = anomaly.evaluate_batch(
        state, [(key, step, float(v)) for step, values in points for key, v in values.items()],
        anomaly.active_rules([]), attempt=1)
    seen = {(type(e).__name__, e.rule, e.step) for e in events}
    assert ("Finding", "throughput_drop", 300) in seen
    assert ("Cleared", "throughput_drop", 300 + demo.COLLAPSE_STEPS) in seen
    assert ("Finding", "gpu_util_collapse", 340) in seen  # after 5 low points


def test_curves_are_a_function_of_the_job_and_step_only():
    assert demo.curves(3, 1234, 6000) == demo.curves(3, 1234, 6000)
    assert demo.curves(3, 1234, 6000) != demo.curves(4, 1234, 6000)
    lr = [demo.curves(3, s, 6000)["train/lr"] for s in range(0, 6000, 10)]
    peak = lr.index(max(lr))
    assert 0 < peak < len(lr) // 4 and lr[-1] < lr[peak] / 5  # warm-up, then cosine decay
    loss = [demo.curves(3, s, 6000)["train/loss"] for s in (0, 3000, 5990)]
    assert loss[0] > loss[1] > loss[2] > 1 and all(math.isfinite(v) for v in loss)


def test_the_seeded_demo_has_a_job_that_fails_early_and_experiments():
    from jobs.demo import EXPERIMENTS, JOBS, LABELS

    assert set(EXPERIMENTS) == {row[2] for row in JOBS}
    kinds = {demo.anomaly_of(labels) for labels in LABELS.values()} - {None}  # None: an injected failure or idle GPUs
    assert {kind for kind, _ in kinds} == {"nan", "throughput"}
    assert all(step / demo.STEPS_PER_SECOND <= 40 for _, step in kinds)  # an alert within a minute of starting
