"""In-process replacements for the worker, beat and scheduler services, used when REDIS_URL is unset.

Each app that needs a periodic loop registers it in EMBEDDED_LOOPS; `make run` starts them as daemon threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections

logger = logging.getLogger(__name__)

Waiter = Callable[[float], object]

# (name, function, interval in seconds, waiter). The waiter blocks between runs (default: sleep the interval); the
# scheduler's returns early when a submission wakes it. Apps append to this from their AppConfig.ready().
EMBEDDED_LOOPS: list[tuple[str, Callable[[], object], float, Waiter | None]] = []


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
