"""What is read from DCGM's exporter and how each field is stored (pure: no Django, no I/O).

A field is a DCGM metric name, the suffix of the run's system series per GPU (`system/gpu.<i>.<suffix>`) and the
factor its value is multiplied by. The suffixes are the SDK's own where the SDK logs the same reading through NVML
(`utilization`, `memory_used_gib`, `power_watts`, `temperature_c`), so a job that logs through the SDK and is
scraped by DCGM shows one series per reading, not two spellings of it. DCGM reports SM and tensor activity as a
ratio (0-1): they are stored in percent, like utilization.

Node-level counters (RDMA, from node-exporter's infiniband collector) are read per node, each by a query of its own
(`NODE_FIELDS`), and stored per node of the attempt (`system/node.<i>.<suffix>`). NCCL has no standard exporter:
nothing of NCCL's own is read. A field Prometheus does not hold is simply absent: its series is never written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from core.digits import is_digits

MIB_PER_GIB = 1024.0


class Field(NamedTuple):
    metric: str
    suffix: str
    factor: float


FIELDS: tuple[Field, ...] = (
    Field("DCGM_FI_DEV_GPU_UTIL", "utilization", 1.0),
    Field("DCGM_FI_PROF_SM_ACTIVE", "sm_active", 100.0),
    Field("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active", 100.0),
    Field("DCGM_FI_DEV_FB_USED", "memory_used_gib", 1 / MIB_PER_GIB),
    Field("DCGM_FI_DEV_FB_FREE", "memory_free_gib", 1 / MIB_PER_GIB),
    Field("DCGM_FI_DEV_POWER_USAGE", "power_watts", 1.0),
    Field("DCGM_FI_DEV_GPU_TEMP", "temperature_c", 1.0),
    Field("DCGM_FI_DEV_XID_ERRORS", "xid", 1.0),  # the last Xid error's code (0: none)
    # Counters: ECC errors since the driver loaded, NVLink CRC errors, PCIe replays.
    Field("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "ecc_sbe", 1.0),
    Field("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_dbe", 1.0),
    Field("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "nvlink_crc_errors", 1.0),
    Field("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "pcie_replays", 1.0),
    # Bandwidth (DCGM's profiling fields: bytes a second over the sample), stored in GB/s.
    Field("DCGM_FI_PROF_NVLINK_TX_BYTES", "nvlink_tx_gb_s", 1e-9),
    Field("DCGM_FI_PROF_NVLINK_RX_BYTES", "nvlink_rx_gb_s", 1e-9),
    Field("DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_gb_s", 1e-9),
    Field("DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_gb_s", 1e-9),
)
BY_METRIC = {field.metric: field for field in FIELDS}
NODE = -1  # a Sample's `gpu` when the reading is of the whole node


class NodeField(NamedTuple):
    """A node-level counter, summed over the node's devices and ports; `rate`: read as its rate per second."""

    metric: str
    suffix: str
    rate: bool
    factor: float


NODE_FIELDS: tuple[NodeField, ...] = (
    NodeField("node_infiniband_port_data_transmitted_bytes_total", "rdma_tx_gb_s", True, 1e-9),
    NodeField("node_infiniband_port_data_received_bytes_total", "rdma_rx_gb_s", True, 1e-9),
    # Counts since the port's counters were reset, as the ECC counters are.
    NodeField("node_infiniband_port_errors_received_total", "rdma_rx_errors", False, 1.0),
    NodeField("node_infiniband_port_discards_transmitted_total", "rdma_tx_discards", False, 1.0),
    NodeField("node_infiniband_link_downed_total", "rdma_link_downed", False, 1.0),
)
SM_ACTIVE = "sm_active"
UTILIZATION = "utilization"
# The per-GPU readings the pages chart, in this order.
CHARTED = ("sm_active", "utilization", "tensor_active", "memory_used_gib", "power_watts", "temperature_c")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# One matcher of a PromQL selector: name, operator, double-quoted value (escapes allowed).
MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def key(ordinal: int, suffix: str) -> str:
    """The run's series key of one GPU's field; `ordinal` is the GPU's place in the attempt (0 .. devices - 1)."""
    return f"system/gpu.{ordinal}.{suffix}"


def node_key(ordinal: int, suffix: str) -> str:
    """The run's series key of a node-level field; `ordinal` is the node's place among the attempt's nodes."""
    return f"system/node.{ordinal}.{suffix}"


@dataclass(frozen=True)
class Labels:
    """Which exporter labels name the pod, its namespace, the node, the GPU's index on it and its UUID (per cluster:
    dcgm-exporter's defaults are `pod`, `namespace`, `Hostname`, `gpu`, `UUID`; relabelling changes them), and
    which names the node on node-level series (node-exporter's: Prometheus' `instance`, host:port)."""

    pod: str = "pod"
    namespace: str = "namespace"
    node: str = "Hostname"
    gpu: str = "gpu"
    uuid: str = "UUID"
    host: str = "instance"


class ConfigError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def check_label(field: str, value: Any, *, required: bool = True) -> str:
    """A Prometheus label name, or ConfigError naming `field`."""
    if not isinstance(value, str):
        raise ConfigError(field, "must be a string")
    if not value and not required:
        return value
    if not LABEL_NAME.match(value) or value.startswith("__"):
        raise ConfigError(field, f"{value[:60]!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not "
                          "starting with __)")
    return value


def check_selector(value: Any) -> str:
    """Extra label matchers every query adds (e.g. `cluster="a100-east"` when one Prometheus scrapes several
    clusters): a comma-separated list of `label op "value"`, or empty."""
    if not isinstance(value, str):
        raise ConfigError("selector", "must be a string")
    text = value.strip()
    position = 0
    while position < len(text):
        match = MATCHER.match(text, position)
        if match is None:
            raise ConfigError("selector", f"{text[position:position + 40]!r} is not a label matcher "
                              '(label="value", label=~"regex", label!="value")')
        if match.group(1).startswith("__"):
            raise ConfigError("selector", f"{match.group(1)!r}: matchers on internal labels are not allowed")
        position = match.end()
    return text


def _extra(selector: str) -> str:
    return f", {selector.rstrip(', ')}" if selector.strip() else ""


def query(selector: str) -> str:
    """The one PromQL query that reads every per-GPU field of every GPU the selector picks."""
    names = "|".join(field.metric for field in FIELDS)
    return f'{{__name__=~"{names}"{_extra(selector)}}}'


def node_query(field: NodeField, selector: str, host_label: str, step: int) -> str:
    """The query of one node-level field: summed per node (its devices and ports), as a rate per second over four
    steps for a byte counter (a rate needs two scrapes inside its range)."""
    series = f'{{__name__="{field.metric}"{_extra(selector)}}}'
    if field.rate:
        series = f"rate({series}[{4 * step}s])"
    return f"sum by ({host_label}) ({series})"


class Sample(NamedTuple):
    """One reading of one GPU: where it is (node, index, UUID), whose pod held it as the exporter says (pod and
    namespace empty when it did not say), the field's suffix, the time (s) and the value as stored. A node-level
    reading has `gpu` NODE and no UUID, pod or namespace."""

    node: str
    gpu: int
    uuid: str
    pod: str
    namespace: str
    suffix: str
    timestamp: int
    value: float


def samples(result: Iterable[Mapping[str, Any]], labels: Labels) -> Iterator[Sample]:
    """Prometheus' matrix result (`data.result` of a query_range answer) as samples; series without a node or GPU
    index, of an unknown metric or with an unreadable value are skipped (they name no GPU Tidal can place)."""
    for series in result:
        metric = series.get("metric") or {}
        field = BY_METRIC.get(metric.get("__name__", ""))
        node = metric.get(labels.node, "")
        try:
            gpu = int(metric.get(labels.gpu, ""))
        except ValueError:
            continue
        if field is None or not node or gpu < 0:
            continue
        pod, namespace, uuid = metric.get(labels.pod, ""), metric.get(labels.namespace, ""), metric.get(labels.uuid, "")
        for timestamp, raw in series.get("values") or ():
            try:
                value = float(raw) * field.factor
            except (TypeError, ValueError):
                continue
            if math.isfinite(value):
                yield Sample(node, gpu, uuid, pod, namespace, field.suffix, int(float(timestamp)), value)


def host_name(instance: str) -> str:
    """The host of a `host:port` label value (Prometheus' `instance`); a value without a port as it is."""
    host, colon, port = instance.rpartition(":")
    return host.strip("[]") if colon and is_digits(port) else instance


def node_samples(result: Iterable[Mapping[str, Any]], field: NodeField, host_label: str) -> Iterator[Sample]:
    """A node-level query's matrix as node samples; series without the host label or with unreadable values are
    skipped."""
    for series in result:
        node = host_name((series.get("metric") or {}).get(host_label, ""))
        if not node:
            continue
        for timestamp, raw in series.get("values") or ():
            try:
                value = float(raw) * field.factor
            except (TypeError, ValueError):
                continue
            if math.isfinite(value):
                yield Sample(node, NODE, "", "", "", field.suffix, int(float(timestamp)), value)
