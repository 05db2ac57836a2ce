"""Demo prices, budgets, and five weeks of past usage of the demo projects replayed from the Philly trace (read in
place; without it the demo has only what its jobs use from now on). Safe to run twice: nothing is added twice."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.utils import timezone

from costs import services
from costs.metering.rollup import roll_segments
from costs.models import Budget, ClassDiscount, CpuPrice, DevicePrice, MemoryPrice, TidalRate, UsageSegment
from quotas.models import PriorityClass, Quota, ResourceFlavor
from replay.importers import import_philly
from replay.paths import trace_path
from tenancy.models import Project

ACTOR = "seed_demo"
TRACE = "philly_week_2017-10-16.csv"
HISTORY_DAYS = 35
STRETCH = 5  # the trace's week spread over five weeks
MAX_JOBS = 4000
# Per device-hour, roughly what clouds charged in 2026.
DEVICE_PRICES = {"nvidia-h100-80gb": "3.20", "nvidia-a100-40gb": "1.40", "ascend-910b": "1.10"}
CPU_CORE_HOUR = "0.04"
MEMORY_GIB_HOUR = "0.005"  # every flavor's, per GiB-hour of memory requested
DEMO_TEAMS = ("research", "product", "platform")  # the history's job labels (team), so reports group by them
PREEMPTIBLE_FACTOR = "0.35"
TIDAL_FACTOR = "0.2"  # capacity a pool lent, which it takes back within a give-back: cheaper than preemptible


def seed_prices(since: datetime) -> None:
    for name, amount in DEVICE_PRICES.items():
        flavor = ResourceFlavor.objects.filter(name=name).first()
        if flavor is not None and not DevicePrice.objects.filter(flavor=flavor).exists():
            services.price_save(actor=ACTOR, price=DevicePrice(flavor=flavor, per_device_hour=Decimal(amount),
                                                               effective_from=since, note="demo"), backdate=True)
    for name in DEVICE_PRICES:
        flavor = ResourceFlavor.objects.filter(name=name).first()
        if flavor is not None and not MemoryPrice.objects.filter(flavor=flavor).exists():
            services.price_save(actor=ACTOR, price=MemoryPrice(flavor=flavor, per_gib_hour=Decimal(MEMORY_GIB_HOUR),
                                                               effective_from=since, note="demo"), backdate=True)
    if not CpuPrice.objects.exists():
        services.price_save(actor=ACTOR, price=CpuPrice(per_core_hour=Decimal(CPU_CORE_HOUR), effective_from=since,
                                                        note="demo"), backdate=True)
    for klass in PriorityClass.objects.filter(preemptible=True):
        if not ClassDiscount.objects.filter(priority_class=klass).exists():
            services.price_save(actor=ACTOR, price=ClassDiscount(priority_class=klass,
                                                                 factor=Decimal(PREEMPTIBLE_FACTOR),
                                                                 effective_from=since, note="demo"), backdate=True)
    if not TidalRate.objects.exists():
        services.price_save(actor=ACTOR, price=TidalRate(factor=Decimal(TIDAL_FACTOR), effective_from=since,
                                                         note="demo"), backdate=True)


def seed_history(now: datetime) -> int:
    """Past segments of the demo projects from the trace's jobs: each virtual cluster of the trace is one of the
    projects with quotas, on one of its flavors. Returns how many were added."""
    path = trace_path(TRACE)
    quotas = list(Quota.objects.select_related("project__organization").order_by("project__slug", "flavor__name"))
    if UsageSegment.objects.exists() or not path.exists() or not quotas:
        return 0
    start = int((now - timedelta(days=HISTORY_DAYS)).timestamp())
    normal = PriorityClass.objects.get(name="normal")
    cheap = PriorityClass.objects.filter(preemptible=True).first() or normal
    segments = []
    jobs = import_philly(path, skip_invalid=True).jobs
    for job in jobs[::max(1, len(jobs) // MAX_JOBS)]:  # evenly through the week
        quota = quotas[zlib.crc32(f"{job.project}{job.total_devices}".encode()) % len(quotas)]
        begin = start + int(job.submit * STRETCH)
        end = min(begin + max(60, int(job.duration)), int(now.timestamp()) - 60)
        if end <= begin:
            continue
        segments.append(UsageSegment(
            attempt_number=1, organization=quota.project.organization, project=quota.project,
            flavor_id=quota.flavor_id, priority_class=cheap if job.total_devices == 1 and begin % 3 == 0 else normal,
            stage="pretrain" if job.total_devices >= 8 else "sft", experiment=f"philly {job.project}",
            devices=job.total_devices, cpu_millis=4000 * max(1, job.replicas), start_ts=begin, end_ts=end,
            memory_mib=32768 * max(1, job.total_devices),
            labels={"team": DEMO_TEAMS[zlib.crc32(job.project.encode()) % len(DEMO_TEAMS)]},
            borrowed=max(0, job.total_devices - quota.guaranteed),  # what one job alone would borrow
            outcome="succeeded"))
    UsageSegment.objects.bulk_create(segments, batch_size=2000)
    while roll_segments():
        pass
    return len(segments)


# Monthly budgets: vision's soft one crosses its first thresholds on the history; language's hard one is far off.
BUDGETS = {"vision": ("3000", False), "language": ("20000", True)}


def seed_budgets() -> None:
    for slug, (amount, hard) in BUDGETS.items():
        project = Project.objects.filter(slug=slug).first()
        if project is not None and not Budget.objects.filter(project=project).exists():
            services.budget_save(actor=ACTOR, budget=Budget(project=project),
                                 values={"amount": Decimal(amount), "hard": hard})


def seed_costs() -> int:
    now = timezone.now()
    seed_prices(datetime(now.year - 1, 1, 1, tzinfo=UTC))
    seed_budgets()
    return seed_history(now)
