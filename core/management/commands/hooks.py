"""`manage.py hooks`: every hook (`core.hooks`) and what is connected to it, in the order it is called; e.g. who
follows the job state machine (`jobs.lifecycle.on_change`) and which backends the dispatch port has."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from core.hooks import declared, describe


class Command(BaseCommand):
    help = "List every hook between apps and what is connected to it, in order."

    def handle(self, *args: Any, **options: Any) -> None:
        for hook in declared():
            flags = ", ".join(flag for flag, on in (("single", hook.single), ("required", hook.required)) if on)
            self.stdout.write(f"{hook.name}" + (f" ({flags})" if flags else ""))
            for receiver in hook.receivers:
                self.stdout.write(f"  {describe(receiver)}")
            if not hook.receivers:
                self.stdout.write("  (nothing connected)")
