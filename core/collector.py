"""Pausing Python's cyclic garbage collector around allocation-heavy work, decided by the caller.

A scheduling cycle (or a trace replay) allocates many small objects and frees them all at once: the collector would
scan them again and again for nothing (about 15% of a 10,000-job cycle). Pausing it is process-wide, so a long or
repeated pause belongs to a process that does nothing else at the time: the scheduler's own process and a replay
worker, not the embedded mode, where web requests share the process. A telemetry read pauses it for its few
seconds wherever it runs (telemetry.ingest.read_source): others' garbage then waits for them, no more.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused(enabled: bool = True) -> Iterator[None]:
    """Pause the collector for the block when `enabled`; it runs again afterwards if it ran before."""
    was_enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if enabled and was_enabled:
            gc.enable()
