"""NVLink and PCIe bandwidth (DCGM, per GPU) and RDMA counters (node-exporter's infiniband collector, per node),
read from a real Prometheus when exported, absent when not."""

from __future__ import annotations

import pytest

from telemetry import ingest
from tests.telemetry.conftest import admit, needs_prometheus, pod_of, points, submit
from tracking.models import Series

pytestmark = needs_prometheus


def only(job, key: str, expected: float, rel: float = 1e-9) -> bool:
    """The key has points and each is `expected`."""
    values = list(points(job, key).values())
    return bool(values) and values == pytest.approx([expected] * len(values), rel=rel)


def settled(job, key: str) -> list[float]:
    """The last three points of a rate: the first ones, over a range from before the series began, read less."""
    values = list(points(job, key).values())
    assert len(values) >= 3, values
    return values[-3:]


def test_bandwidth_and_rdma_counters_are_stored_per_gpu_and_per_node(tenant, inventory, kube, exporter,
                                                                     node_exporter, prometheus_with_nodes):
    """Two jobs share gpu-node-7: each has its GPUs' NVLink and PCIe figures and the node's RDMA figures."""
    first = admit(submit(tenant, inventory["h100"], replicas=1, devices=4, name="a"), kube, ["gpu-node-7"])
    second = admit(submit(tenant, inventory["h100"], replicas=1, devices=4, name="b"), kube, ["gpu-node-7"])
    exporter.set(pods={**{g: (pod_of(first), "tidal-vision") for g in range(4)},
                       **{g: (pod_of(second), "tidal-vision") for g in range(4, 8)}})
    prometheus_with_nodes.wait_for_scrapes(8)

    assert ingest.read_all() > 0

    # The recording's GPU 5 (the second job's second) transmits 46.5e9 bytes a second over NVLink.
    assert only(second, "system/gpu.1.nvlink_tx_gb_s", 46.5)
    assert only(first, "system/gpu.0.pcie_rx_gb_s", 3.25)
    for job in (first, second):
        # Two ports of 2.5 GB/s each: the node's rate, summed over its devices (a rate needs two scrapes; within
        # 10%: Prometheus stamps a sample when the scrape starts, a loaded machine renders it a little later).
        assert settled(job, "system/node.0.rdma_tx_gb_s") == pytest.approx([5.0] * 3, rel=0.1)
        assert settled(job, "system/node.0.rdma_rx_gb_s") == pytest.approx([3.0] * 3, rel=0.1)
        assert only(job, "system/node.0.rdma_rx_errors", 2.0)
        assert only(job, "system/node.0.rdma_link_downed", 0.0)


def test_counters_that_are_not_exported_are_absent(tenant, inventory, kube, exporter, prometheus_server):
    """No node-exporter, and a DCGM exporter configured without the bandwidth fields: the read stores the rest."""
    job = admit(submit(tenant, inventory["h100"], replicas=1, devices=8), kube, ["gpu-node-7"])
    exporter.drop = {"DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"}
    exporter.set(pods={g: (pod_of(job), "tidal-vision") for g in range(8)})
    prometheus_server.wait_for_scrapes(3)

    assert ingest.read_all() > 0

    keys = set(Series.objects.filter(run__job=job).values_list("key", flat=True))
    assert "system/gpu.0.sm_active" in keys
    assert "system/gpu.0.nvlink_crc_errors" in keys  # an error counter the exporter serves
    assert not [key for key in keys if key.endswith((".nvlink_tx_gb_s", ".pcie_rx_gb_s"))
                or key.startswith("system/node.")]
