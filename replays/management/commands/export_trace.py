"""`manage.py export_trace`: the platform's own finished jobs of a date range as a replay trace CSV."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from core.streams import RawStream
from replays import services


def moment(value: str) -> dt.datetime:
    """A date (midnight UTC) or an ISO datetime (UTC when it has no offset)."""
    parsed = parse_datetime(value)
    if parsed is None:
        day = parse_date(value)
        if day is None:
            raise ValueError(f"not a date: {value!r} (YYYY-MM-DD or an ISO datetime)")
        parsed = dt.datetime.combine(day, dt.time())
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, dt.UTC)


class Command(BaseCommand):
    help = ("Export jobs submitted in [--since, --until) as a replay trace (jobs that never ran are skipped); "
            "--anonymize replaces project and user names with keyed hashes.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--since", required=True, help="first submit date, YYYY-MM-DD or ISO datetime (UTC)")
        parser.add_argument("--until", help="end of the range, exclusive (default: now)")
        parser.add_argument("--anonymize", action="store_true", help="hash project and user names, renumber jobs")
        parser.add_argument("--salt", help="key of the name hashes (default: derived from SECRET_KEY)")
        parser.add_argument("--out", required=True, help="trace CSV to write, or - for stdout")

    def handle(self, *args, **options) -> None:
        try:
            since = moment(options["since"])
            until = moment(options["until"]) if options["until"] else timezone.now()
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if until <= since:
            raise CommandError("--until must be after --since", returncode=2)
        dest = RawStream(self.stdout) if options["out"] == "-" else Path(options["out"])
        counts = services.export_history(since, until, dest, anonymize=options["anonymize"], salt=options["salt"])
        skipped = {k: v for k, v in sorted(counts.items()) if k not in ("exported", "priority_defaulted")}
        note = f"; skipped {sum(skipped.values())} ({', '.join(f'{k}: {v}' for k, v in skipped.items())})" \
            if skipped else ""
        if counts.get("priority_defaulted"):
            note += f"; {counts['priority_defaulted']} with other priority classes exported as normal"
        self.stderr.write(f"exported {counts['exported']} jobs to {options['out']}{note}")
