"""The scheduler service: `manage.py run_scheduler` (a docker-compose service; in-process in `make run`)."""

import signal
import threading

from django.core.management.base import BaseCommand

from jobs.loop import run_forever


class Command(BaseCommand):
    help = "Run the scheduling loop. Several may run: a PostgreSQL advisory lock lets one decide at a time."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=None, help="seconds between cycles when not woken")

    def handle(self, *args, interval, **options):
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write("scheduler loop started")
        run_forever(interval=interval, stop=stop, pause_collector=True)  # this process does nothing else
