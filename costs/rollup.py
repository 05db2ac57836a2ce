"""Closed segments, cut at UTC midnights and priced, become `UsageDay` rows (a beat task and an embedded loop).

Only closed segments are rolled, and only with prices whose dates have passed: history is never edited
(`costs.services`), so a rolled day is final. Reports add the segments not rolled yet (open ones, costed to now, and
those closed since the last run), so a report is the same before and after a roll."""

from __future__ import annotations

from datetime import date, timedelta

from django.db import transaction

from costs.models import UsageDay, UsageSegment
from costs.prices import price_book
from costs.pricing import PriceBook, Usage, day_pieces

EPOCH_DAY = date(1970, 1, 1)


def usage_of(segment: UsageSegment) -> Usage:
    return Usage(segment.flavor_id, segment.cluster_id, segment.priority_class_id, segment.devices,
                 segment.cpu_millis)


def days_of(segment: UsageSegment, book: PriceBook) -> list[UsageDay]:
    usage = usage_of(segment)
    return [UsageDay(segment_id=segment.pk, day=EPOCH_DAY + timedelta(days=day),
                     organization_id=segment.organization_id, project_id=segment.project_id,
                     user_id=segment.user_id, job_id=segment.job_id, experiment=segment.experiment,
                     stage=segment.stage, flavor_id=segment.flavor_id, cluster_id=segment.cluster_id,
                     priority_class_id=segment.priority_class_id, outcome=segment.outcome,
                     device_seconds=segment.devices * (end - start),
                     cpu_seconds=round(segment.cpu_millis * (end - start) / 1000),
                     cost=book.cost(usage, start, end))
            for day, start, end in day_pieces(segment.start_ts, segment.end_ts)]


def roll_segments(batch: int = 5000) -> int:
    """Roll up to `batch` closed segments; returns how many."""
    book = price_book()
    with transaction.atomic():
        segments = list(UsageSegment.objects.select_for_update(skip_locked=True)
                        .filter(rolled=False, end_ts__isnull=False).order_by("start_ts")[:batch])
        days = [day for segment in segments for day in days_of(segment, book)]
        UsageDay.objects.bulk_create(days, batch_size=2000, ignore_conflicts=True)
        UsageSegment.objects.filter(pk__in=[s.pk for s in segments]).update(rolled=True)
    return len(segments)
