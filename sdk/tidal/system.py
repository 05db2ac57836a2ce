"""System metrics every N seconds under `system/`: CPU, memory, disk and network through psutil; GPU utilization,
memory, power and temperature through NVML when `nvidia-ml-py` is installed and a GPU is there (else skipped)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from time import monotonic
from typing import Any

log = logging.getLogger("tidal")
GIB = 1024**3
MIB = 1024**2


class _Gpus:
    """NVML's view of the GPUs; empty when the library or the driver is missing."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.handles: list[Any] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self.nvml = pynvml
        except Exception:  # not installed, no driver, no GPU: GPU metrics are skipped
            self.handles = []

    def sample(self) -> dict[str, float]:
        values: dict[str, float] = {}
        nvml = self.nvml
        readers: list[tuple[str, Callable[[Any], float]]] = [
            ("utilization", lambda h: nvml.nvmlDeviceGetUtilizationRates(h).gpu),
            ("memory_percent", lambda h: _percent(nvml.nvmlDeviceGetMemoryInfo(h))),
            ("memory_used_gib", lambda h: nvml.nvmlDeviceGetMemoryInfo(h).used / GIB),
            ("power_watts", lambda h: nvml.nvmlDeviceGetPowerUsage(h) / 1000),
            ("temperature_c", lambda h: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)),
        ]
        for index, handle in enumerate(self.handles):
            prefix = f"system/gpu.{index}."
            for name, read in readers:
                try:
                    values[prefix + name] = float(read(handle))
                except Exception:  # noqa: S112  (a reading this GPU does not support)
                    continue
        return values

    def close(self) -> None:
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()


def _percent(memory: Any) -> float:
    return 100.0 * memory.used / memory.total if memory.total else 0.0


class SystemMonitor:
    """A daemon thread that samples every `interval` seconds and hands the values to `emit(values, step)`; the
    step is the number of whole seconds since the monitor started."""

    def __init__(self, interval: float, emit: Callable[[dict[str, float], int], None]) -> None:
        self.interval = interval
        self.emit = emit
        self._stop = threading.Event()
        self._started = monotonic()
        self._net: tuple[float, int, int] | None = None
        self._thread = threading.Thread(target=self._main, name="tidal-system-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _main(self) -> None:
        try:
            import psutil
        except ImportError:
            log.warning("tidal: psutil is not installed: no system metrics")
            return
        psutil.cpu_percent(None)  # the first reading only starts the measurement
        gpus = _Gpus()
        try:
            while not self._stop.wait(self.interval):
                try:
                    values = {**self.sample(psutil), **gpus.sample()}
                except Exception:
                    log.debug("tidal: a system metrics sample failed", exc_info=True)
                    continue
                self.emit(values, int(monotonic() - self._started))
        finally:
            gpus.close()

    def sample(self, psutil: Any) -> dict[str, float]:
        memory = psutil.virtual_memory()
        disk = psutil.disk_usage("/")
        values = {
            "system/cpu_percent": float(psutil.cpu_percent(None)),
            "system/memory_percent": float(memory.percent),
            "system/memory_used_gib": memory.used / GIB,
            "system/disk_percent": float(disk.percent),
            "system/disk_used_gib": disk.used / GIB,
        }
        net = psutil.net_io_counters()
        now = monotonic()
        if net is not None:
            if self._net is not None:
                then, sent, received = self._net
                elapsed = max(now - then, 1e-6)
                values["system/network_sent_mib_s"] = (net.bytes_sent - sent) / MIB / elapsed
                values["system/network_received_mib_s"] = (net.bytes_recv - received) / MIB / elapsed
            self._net = (now, net.bytes_sent, net.bytes_recv)
        return values
