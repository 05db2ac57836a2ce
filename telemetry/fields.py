"""What is read from DCGM's exporter and how each field is stored (pure: no Django, no I/O).

A field is a DCGM metric name, the suffix of the run's system series per GPU (`system/gpu.<i>.<suffix>`) and the
factor its value is multiplied by. The suffixes are the SDK's own where the SDK logs the same reading through NVML
(`utilization`, `memory_used_gib`, `power_watts`, `temperature_c`), so a job that logs through the SDK and is
scraped by DCGM shows one series per reading, not two spellings of it. DCGM reports SM and tensor activity as a
ratio (0-1): they are stored in percent, like utilization.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

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
)
BY_METRIC = {field.metric: field for field in FIELDS}
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


@dataclass(frozen=True)
class Labels:
    """Which exporter labels name the pod, its namespace, the node, the GPU's index on it and its UUID (per cluster:
    dcgm-exporter's defaults are `pod`, `namespace`, `Hostname`, `gpu`, `UUID`; relabelling changes them)."""

    pod: str = "pod"
    namespace: str = "namespace"
    node: str = "Hostname"
    gpu: str = "gpu"
    uuid: str = "UUID"


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


def query(selector: str) -> str:
    """The one PromQL query that reads every field of every GPU the selector picks."""
    names = "|".join(field.metric for field in FIELDS)
    extra = f", {selector.rstrip(', ')}" if selector.strip() else ""
    return f'{{__name__=~"{names}"{extra}}}'


class Sample(NamedTuple):
    """One reading of one GPU: where it is (node, index, UUID), whose pod held it as the exporter says (pod and
    namespace empty when it did not say), the field's suffix, the time (s) and the value as stored."""

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
        if field is None or not node:
            continue
        pod, namespace, uuid = metric.get(labels.pod, ""), metric.get(labels.namespace, ""), metric.get(labels.uuid, "")
        for timestamp, raw in series.get("values") or ():
            try:
                value = float(raw) * field.factor
            except (TypeError, ValueError):
                continue
            if math.isfinite(value):
                yield Sample(node, gpu, uuid, pod, namespace, field.suffix, int(float(timestamp)), value)
