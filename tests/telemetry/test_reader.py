"""The reader against a real Prometheus scraping a DCGM exporter: attribution with and without pod labels, a
Prometheus outage and restart, the bounded window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.models import Attempt
from telemetry import ingest, readings
from telemetry.models import AttemptGpu, AttemptTelemetry, StagedPoints, TelemetrySource
from tests.telemetry.conftest import admit, needs_prometheus, pod_of, points, submit

pytestmark = needs_prometheus


def two_replica_job(tenant, inventory, kube):
    """A job of two 4-GPU replicas on gpu-node-7."""
    job = submit(tenant, inventory["h100"], replicas=2, devices=4, name="train-llm")
    return admit(job, kube, ["gpu-node-7", "gpu-node-7"])


def test_samples_go_to_the_attempt_whose_pod_held_the_gpu(tenant, inventory, kube, exporter, prometheus_server):
    job = two_replica_job(tenant, inventory, kube)
    # GPUs 0-3 in replica 0's pod, 4-6 in replica 1's; GPU 7 without pod labels (the exporter's known gap).
    exporter.set(pods={**{g: (pod_of(job, index=0), "tidal-vision") for g in range(4)},
                       **{g: (pod_of(job, index=1), "tidal-vision") for g in range(4, 7)}})
    prometheus_server.wait_for_scrapes(3)

    assert ingest.read_all() > 0

    gpus = {(row.node, row.gpu): row.ordinal for row in AttemptGpu.objects.filter(attempt=job.current_attempt)}
    assert gpus == {("gpu-node-7", g): g for g in range(8)}  # GPU 7 by node and index: the job holds the node
    sm = points(job, "system/gpu.0.sm_active", attempt=1)
    assert sm and all(value == pytest.approx(41.2) for value in sm.values())  # 0.412 as a percentage
    assert set(points(job, "system/gpu.4.utilization").values()) == {99.0}
    assert set(points(job, "system/gpu.7.sm_active").values()) == {0.0}
    assert list(points(job, "system/gpu.2.memory_used_gib").values()) == pytest.approx([68262 / 1024] * len(sm))
    assert set(points(job, "system/gpu.3.ecc_sbe").values()) == {2.0}
    # One point a second, stepped by seconds since the attempt's admission.
    admitted = int(job.current_attempt.admitted_at.timestamp())
    steps = sorted(sm)
    assert steps == list(range(steps[0], steps[-1] + 1)) and steps[0] >= 0
    tally = AttemptTelemetry.objects.get(attempt=job.current_attempt)
    assert tally.last_at == datetime.fromtimestamp(admitted + steps[-1], tz=UTC)
    mean_sm = (0.412 + 0.398 + 0.447 + 0.385 + 0.429 + 0.401 + 0.433 + 0.0) / 8 * 100
    assert tally.sm_active == pytest.approx(mean_sm, rel=1e-6)
    source = TelemetrySource.objects.get(cluster=kube)
    assert source.read_through is not None and source.last_error == ""


def test_samples_of_another_installations_or_unknown_pods_are_not_taken(tenant, inventory, kube, exporter,
                                                                      prometheus_server):
    job = two_replica_job(tenant, inventory, kube)
    exporter.set(pods={0: (pod_of(job, index=0), "someone-else"), 1: ("jupyter-abc", "tidal-vision"),
                       4: (pod_of(job, index=1), "tidal-vision")})
    prometheus_server.wait_for_scrapes(3)
    ingest.read_all()
    seen = set(AttemptGpu.objects.filter(attempt=job.current_attempt).values_list("gpu", flat=True))
    assert 4 in seen and 0 not in seen and 1 not in seen


def test_without_pod_labels_the_node_and_gpu_index_decide(tenant, inventory, kube, exporter, prometheus_server):
    """Two jobs share the node. With pod labels their GPUs are known; when the exporter stops naming pods, each
    GPU's samples still go to the job it was seen under. A GPU never seen under a pod is not guessed."""
    first = submit(tenant, inventory["h100"], replicas=1, devices=4, name="a")
    second = submit(tenant, inventory["h100"], replicas=1, devices=4, name="b")
    first, second = admit(first, kube, ["gpu-node-7"]), admit(second, kube, ["gpu-node-7"])
    exporter.set(pods={**{g: (pod_of(first), "tidal-vision") for g in range(3)},
                       **{g: (pod_of(second), "tidal-vision") for g in range(4, 7)}})
    prometheus_server.wait_for_scrapes(3)
    ingest.read_all()
    before = points(second, "system/gpu.0.utilization")
    assert before

    exporter.set(pods={}, values={("DCGM_FI_DEV_GPU_UTIL", 4): 55.0})
    prometheus_server.wait_for_scrapes(3)
    ingest.read_all()

    after = points(second, "system/gpu.0.utilization")  # GPU 4 is the second job's first GPU
    assert max(after) > max(before) and 55.0 in after.values()
    assert 55.0 not in points(first, "system/gpu.0.utilization").values()
    # GPU 3 and 7 were never under a pod: two jobs share the node, so neither gets them.
    held = set(AttemptGpu.objects.filter(attempt__job__in=[first, second]).values_list("gpu", flat=True))
    assert held == {0, 1, 2, 4, 5, 6}


def test_a_job_holding_the_whole_node_gets_its_unlabelled_gpus(tenant, inventory, kube, exporter,
                                                               prometheus_server):
    job = submit(tenant, inventory["h100"], replicas=1, devices=8)
    job = admit(job, kube, ["gpu-node-7"])
    exporter.set(pods={})  # an exporter without the kubelet's pod-resources socket
    prometheus_server.wait_for_scrapes(3)
    ingest.read_all()
    assert AttemptGpu.objects.filter(attempt=job.current_attempt).count() == 8
    sm = list(points(job, "system/gpu.1.sm_active").values())
    assert sm and sm == pytest.approx([39.8] * len(sm))


def test_an_outage_of_prometheus_loses_nothing_it_still_holds(tenant, inventory, kube, exporter,
                                                              prometheus_server):
    job = submit(tenant, inventory["h100"], replicas=1, devices=8)
    job = admit(job, kube, ["gpu-node-7"])
    exporter.set(pods={g: (pod_of(job), "tidal-vision") for g in range(8)})
    prometheus_server.wait_for_scrapes(3)
    ingest.read_all()
    source = TelemetrySource.objects.get(cluster=kube)
    position = source.read_through
    # Prometheus keeps scraping a while after this read: those samples are what it holds when it goes down.
    exporter.set(values={("DCGM_FI_PROF_SM_ACTIVE", 0): 0.77})
    prometheus_server.wait_for_scrapes(4, metric="DCGM_FI_PROF_SM_ACTIVE")
    prometheus_server.stop()

    assert ingest.read_all() == 0  # fails cleanly, keeps its position
    source.refresh_from_db()
    assert source.read_through == position
    assert "could not be reached" in source.last_error

    prometheus_server.start()
    prometheus_server.wait_for_scrapes(2)
    ingest.read_all()
    source.refresh_from_db()
    assert source.last_error == "" and source.read_through > position
    sm = points(job, "system/gpu.0.sm_active")
    caught_up = [step for step, value in sm.items() if value == pytest.approx(77.0)]
    assert len(caught_up) >= 4  # the samples taken between the last read and the outage
    admitted = int(job.current_attempt.admitted_at.timestamp())
    assert min(caught_up) > int(position.timestamp()) - admitted  # read after the position, none before it


def test_one_read_asks_for_at_most_the_window(tenant, inventory, kube, exporter, prometheus_server, settings):
    job = submit(tenant, inventory["h100"], replicas=1, devices=8)
    job = admit(job, kube, ["gpu-node-7"], now=datetime.now(tz=UTC) - timedelta(minutes=5))
    exporter.set(pods={g: (pod_of(job), "tidal-vision") for g in range(8)})
    prometheus_server.wait_for_scrapes(9)  # the labelled series start now: the window below is in their time
    settings.TIDAL = {**settings.TIDAL, "TELEMETRY_WINDOW": 3}
    ingest.ensure_sources()
    source = TelemetrySource.objects.get(cluster=kube)
    source.read_through = datetime.now(tz=UTC) - timedelta(seconds=6)  # 6 s of samples are due; 3 are read
    source.save()

    read = ingest.read_source(source, datetime.now(tz=UTC))

    assert read.window is not None and read.window.end - read.window.start == 2  # 3 one-second steps
    assert read.samples > 0 and read.unattributed == 0
    source.refresh_from_db()
    assert int(source.read_through.timestamp()) == read.window.end
    steps = points(job, "system/gpu.0.utilization")
    assert len(steps) == 3


def test_an_answer_that_is_not_prometheus_fails_the_read_and_keeps_the_position(tenant, inventory, kube, exporter,
                                                                                 prometheus_server, settings):
    job = submit(tenant, inventory["h100"], replicas=1, devices=8)
    admit(job, kube, ["gpu-node-7"])
    settings.TIDAL = {**settings.TIDAL, "PROMETHEUS_URL": f"http://{exporter.address}"}  # the exporter: no API
    ingest.ensure_sources()
    source = TelemetrySource.objects.get(cluster=kube)
    read = ingest.read_source(source, datetime.now(tz=UTC))
    assert read.points == 0 and "answered" in read.error
    source.refresh_from_db()
    assert source.read_through is None and "answered" in source.last_error


def test_two_reads_of_one_window_store_it_once(tenant, inventory, kube, exporter, prometheus_server):
    job = submit(tenant, inventory["h100"], replicas=1, devices=8)
    job = admit(job, kube, ["gpu-node-7"])
    exporter.set(pods={g: (pod_of(job), "tidal-vision") for g in range(8)})
    prometheus_server.wait_for_scrapes(3)
    now = datetime.now(tz=UTC)
    TelemetrySource.objects.create(cluster=kube, read_through=now - timedelta(seconds=4))  # scraped since
    first, second = TelemetrySource.objects.get(cluster=kube), TelemetrySource.objects.get(cluster=kube)
    assert ingest.read_source(first, now).points > 0
    assert ingest.read_source(second, now).points == 0  # it read the position it had before the first stored
    tally = AttemptTelemetry.objects.get(attempt=job.current_attempt)
    assert tally.sm_count == len(points(job, "system/gpu.0.sm_active")) * 8  # each sample counted once


def read_until_stored(prometheus_server, tries: int = 5) -> int:
    """Reads after each new scrape until one stores points: a read in the second of the last one finds no window
    due (TELEMETRY_STEP 1) and stores nothing, which is not what a test of the store asks about."""
    for _ in range(tries):
        prometheus_server.wait_for_scrapes(1)
        stored = ingest.read_all()
        if stored:
            return stored
    return 0


def stage_one_attempt(tenant, inventory, kube, exporter, prometheus_server, settings):
    """A running attempt whose points the reads stage (its period does not turn within the test)."""
    settings.TIDAL = {**settings.TIDAL, "TELEMETRY_WRITE_EVERY": 3600}
    job = admit(submit(tenant, inventory["h100"], replicas=1, devices=8), kube, ["gpu-node-7"])
    exporter.set(pods={g: (pod_of(job), "tidal-vision") for g in range(8)})
    # Its phase in the hour is its own: it is not due within the next minute (else this test would not stage).
    phase = job.current_attempt.pk * 7919 % 3600
    if (datetime.now(tz=UTC).timestamp() + phase) % 3600 > 3540:
        pytest.skip("the attempt's hour turns within the minute")
    prometheus_server.wait_for_scrapes(3)
    return job


def test_staged_points_of_an_attempt_whose_end_is_dated_before_the_next_window_are_written(
        tenant, inventory, kube, exporter, prometheus_server, settings):
    # The end of an attempt is recorded after the fact (the pod's finish time): a read may have staged its points
    # while it looked alive, and the next window start after the end it then gets. Its staged points are still
    # written, not left staged for ever.
    job = stage_one_attempt(tenant, inventory, kube, exporter, prometheus_server, settings)
    attempt = job.current_attempt
    assert ingest.read_all() == 0 and StagedPoints.objects.filter(attempt=attempt).exists()
    read_through = TelemetrySource.objects.get().read_through
    Attempt.objects.filter(pk=attempt.pk).update(ended_at=read_through - timedelta(seconds=30))
    assert read_until_stored(prometheus_server) > 0
    assert not StagedPoints.objects.filter(attempt=attempt).exists()
    assert points(job, "system/gpu.0.sm_active")


def test_staged_points_are_written_into_the_series_when_due(tenant, inventory, kube, exporter, prometheus_server,
                                                            settings):
    """Reads stage an attempt's points (its GPUs' latest readings and tally follow every read) until its period
    turns or it ends; then every staged point is written, once, with the new ones."""
    job = stage_one_attempt(tenant, inventory, kube, exporter, prometheus_server, settings)
    attempt = job.current_attempt

    assert ingest.read_all() == 0
    assert not points(job, "system/gpu.0.sm_active")
    tally = AttemptTelemetry.objects.get(attempt=attempt)
    assert tally.sm_count > 0 and AttemptGpu.objects.filter(attempt=attempt).count() == 8
    charted = readings.attempt_readings(tally, list(AttemptGpu.objects.filter(attempt=attempt)), buckets=4)
    shown = [value for value in charted.series["sm_active"][0] if value is not None]  # the job page's chart
    assert shown and shown == pytest.approx([41.2] * len(shown))
    staged = StagedPoints.objects.filter(attempt=attempt).count()  # a row a window read
    prometheus_server.wait_for_scrapes(2)
    assert ingest.read_all() == 0
    assert StagedPoints.objects.filter(attempt=attempt).count() > staged

    Attempt.objects.filter(pk=attempt.pk).update(ended_at=datetime.now(tz=UTC))
    written = read_until_stored(prometheus_server)

    sm = points(job, "system/gpu.0.sm_active")
    tally.refresh_from_db()
    assert written > 0 and len(sm) * 8 == tally.sm_count  # every sample read, once
    steps = sorted(sm)
    assert steps == list(range(steps[0], steps[-1] + 1))  # the staged reads and the last, without a gap
    assert not StagedPoints.objects.filter(attempt=attempt).exists()
