"""In-process replacements for the worker, beat and scheduler services, used when REDIS_URL is unset.

Each app that needs a periodic loop connects it to EMBEDDED_LOOPS in its AppConfig.ready(); `make run` starts them as
daemon threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from django.db import close_old_connections

from core.hooks import Hook

logger = logging.getLogger(__name__)

Waiter = Callable[[float], object]


class Loop(NamedTuple):
    name: str
    func: Callable[[], object]
    interval: float  # seconds
    # Blocks between runs (None: sleep the interval); the scheduler's returns early when a submission wakes it.
    wait: Waiter | None = None


EMBEDDED_LOOPS: Hook[Loop] = Hook("core.embedded.loops")


def _run_forever(name: str, func: Callable[[], object], interval: float, wait: Waiter | None,
                 stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            func()
        except Exception:
            logger.exception("embedded loop %s failed; retrying in %.1fs", name, interval)
        finally:
            close_old_connections()
        (wait or stop.wait)(interval)


def start_background_loops(stop: threading.Event | None = None) -> threading.Event:
    stop = stop or threading.Event()
    for name, func, interval, wait in EMBEDDED_LOOPS:
        thread = threading.Thread(target=_run_forever, args=(name, func, interval, wait, stop), name=name,
                                  daemon=True)
        thread.start()
        logger.info("started embedded loop %s every %.1fs", name, interval)
    time.sleep(0)  # let the threads start before the server takes over the main thread
    return stop
