"""The pure parts: the window after a position, label and selector checks, Prometheus' matrix as samples."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from telemetry import fields, ingest
from telemetry.fields import ConfigError, Labels


@pytest.fixture
def tidal(settings):
    settings.TIDAL = {**settings.TIDAL, "TELEMETRY_STEP": 15, "TELEMETRY_DELAY": 30, "TELEMETRY_WINDOW": 600,
                      "TELEMETRY_LOOKBACK": 3600}
    return settings


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def test_the_first_window_starts_the_lookback_back_and_is_bounded(tidal):
    window = ingest.next_window(None, at(100_000))
    assert window == ingest.Window(start=96_375, end=96_960, step=15)  # 600 s of steps from an hour back
    assert (window.end - window.start) // 15 + 1 == 40


def test_the_next_window_starts_a_step_after_the_position_and_stops_before_now(tidal):
    window = ingest.next_window(at(99_900), at(100_000))
    assert window == ingest.Window(start=99_915, end=99_960, step=15)  # 100,000 - 30 s of delay, on a step
    assert ingest.next_window(at(99_960), at(100_000)) is None  # nothing new is due


def test_a_window_never_asks_prometheus_for_more_than_its_limit(tidal):
    tidal.TIDAL = {**tidal.TIDAL, "TELEMETRY_STEP": 1, "TELEMETRY_WINDOW": 50_000}
    window = ingest.next_window(at(0), at(1_000_000))
    assert (window.end - window.start) + 1 == 11_000 - 1


@pytest.mark.parametrize(("value", "ok"), [("pod", True), ("exported_pod", True), ("_x", True), ("pod-name", False),
                                           ("1gpu", False), ("__name__", False), ("", False), (3, False)])
def test_label_names(value, ok):
    if ok:
        assert fields.check_label("pod_label", value) == value
    else:
        with pytest.raises(ConfigError) as caught:
            fields.check_label("pod_label", value)
        assert caught.value.field == "pod_label"


@pytest.mark.parametrize(("value", "ok"), [('', True), ('cluster="a"', True), ('cluster="a", env=~"p.*"', True),
                                           ('a!="x\\"y"', True), ('cluster=a', False), ('cluster="a" junk', False),
                                           ('__name__="up"', False), ('cluster="a"}', False)])
def test_selectors(value, ok):
    if ok:
        assert fields.check_selector(value) == value.strip()
        assert fields.query(value).startswith('{__name__=~"DCGM_FI_DEV_GPU_UTIL|')
    else:
        with pytest.raises(ConfigError):
            fields.check_selector(value)


def test_the_matrix_as_samples_with_the_clusters_labels():
    result = [
        {"metric": {"__name__": "DCGM_FI_PROF_SM_ACTIVE", "gpu_index": "3", "node": "n1", "exported_pod": "p",
                    "exported_namespace": "ns", "UUID": "GPU-1"}, "values": [[100, "0.5"], [115, "NaN"]]},
        {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "gpu_index": "3", "node": "n1"}, "values": [[100, "2048"]]},
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "node": "n1"}, "values": [[100, "9"]]},  # no GPU index
        {"metric": {"__name__": "DCGM_FI_DEV_SM_CLOCK", "gpu_index": "3", "node": "n1"}, "values": [[100, "1"]]},
    ]
    labels = Labels(pod="exported_pod", namespace="exported_namespace", node="node", gpu="gpu_index")
    assert list(fields.samples(result, labels)) == [
        fields.Sample("n1", 3, "GPU-1", "p", "ns", "sm_active", 100, 50.0),
        fields.Sample("n1", 3, "", "", "", "memory_used_gib", 100, 2.0),
    ]


def test_node_level_fields_are_summed_per_node_and_bytes_read_as_a_rate():
    transmitted, errors = fields.NODE_FIELDS[0], fields.NODE_FIELDS[2]
    assert fields.node_query(transmitted, 'cluster="a"', "instance", 15) == (
        'sum by (instance) (rate({__name__="node_infiniband_port_data_transmitted_bytes_total", cluster="a"}[60s]))')
    assert fields.node_query(errors, "", "node", 15) == (
        'sum by (node) ({__name__="node_infiniband_port_errors_received_total"})')
    result = [{"metric": {"instance": "gpu-node-7:9100"}, "values": [[1700000000, "5e9"], [1700000015, "NaN"]]},
              {"metric": {"instance": "[fd00::7]:9100"}, "values": [[1700000000, "1e9"]]},
              {"metric": {}, "values": [[1700000000, "1"]]}]  # no node: skipped
    assert list(fields.node_samples(result, transmitted, "instance")) == [
        fields.Sample("gpu-node-7", fields.NODE, "", "", "", "rdma_tx_gb_s", 1700000000, 5.0),
        fields.Sample("fd00::7", fields.NODE, "", "", "", "rdma_tx_gb_s", 1700000000, 1.0)]
    assert fields.host_name("gpu-node-7") == "gpu-node-7"


def test_a_gpu_index_below_zero_names_no_gpu():
    result = [{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n", "gpu": "-1"}, "values": [[1, "9"]]}]
    assert list(fields.samples(result, Labels())) == []
