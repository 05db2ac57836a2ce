"""`make run`: the web server with everything else in-process (no Redis, no Celery worker needed)."""

import os

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Serve Tidal with the embedded worker: scheduler loop and simulated cluster run in this process."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", default=os.environ.get("PORT", "8000"))

    def handle(self, *args, host, port, **options):
        from core.embedded import start_background_loops

        start_background_loops()
        self.stdout.write(self.style.SUCCESS(f"Tidal is serving at http://{host}:{port}/ (API docs at /api/docs/)"))
        call_command("runserver", f"{host}:{port}", use_reloader=False, use_threading=True)
