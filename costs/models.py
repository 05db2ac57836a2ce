"""Usage segments (what each attempt held, and when), their daily rollup, the price catalog, and budgets."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from jobs.models import Stage


class UsageSegment(models.Model):
    """One interval an attempt held devices: opened by its admission and closed by the transition that ended it,
    each in that transition's own transaction (`costs.metering.segments`). Times are UTC epoch seconds, so every
    report adds and clips them with plain integer arithmetic on any database. An open segment (`end_ts` null) is
    costed up to now; `rolled` marks a closed segment already split into `UsageDay` rows."""

    attempt = models.OneToOneField("jobs.Attempt", null=True, on_delete=models.SET_NULL, related_name="segment")
    attempt_number = models.PositiveSmallIntegerField()
    job = models.ForeignKey("jobs.Job", null=True, on_delete=models.SET_NULL, related_name="segments")
    organization = models.ForeignKey("tenancy.Organization", on_delete=models.PROTECT, related_name="+")
    project = models.ForeignKey("tenancy.Project", on_delete=models.PROTECT, related_name="segments",
                                db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    cluster = models.ForeignKey("clusters.Cluster", null=True, on_delete=models.SET_NULL, related_name="+")
    flavor = models.ForeignKey("quotas.ResourceFlavor", on_delete=models.PROTECT, related_name="+")
    priority_class = models.ForeignKey("quotas.PriorityClass", on_delete=models.PROTECT, related_name="+")
    stage = models.CharField(max_length=10, choices=Stage.choices)
    experiment = models.CharField(max_length=200, blank=True)
    devices = models.PositiveIntegerField()
    cpu_millis = models.PositiveIntegerField(help_text="CPU requested by all replicas together.")
    memory_mib = models.PositiveBigIntegerField(db_default=0, help_text="Memory requested by all replicas together.")
    labels = models.JSONField(default=dict, blank=True, help_text="The job's labels when the attempt started.")
    borrowed = models.PositiveIntegerField(default=0, help_text="Devices above the project's guarantee.")
    tidal_devices = models.PositiveIntegerField(
        db_default=0, help_text="Of `devices`, those on capacity a pool lent (its attempt's): the tidal rate.")
    start_ts = models.BigIntegerField(help_text="Admission, UTC epoch seconds.")
    end_ts = models.BigIntegerField(null=True, blank=True, help_text="End of the attempt; empty while it holds.")
    outcome = models.CharField(max_length=10, blank=True)
    rolled = models.BooleanField(default=False)

    class Meta:
        ordering = ["start_ts", "id"]
        indexes = [models.Index(fields=["project", "start_ts"], name="costs_segment_project_start"),
                   models.Index(fields=["start_ts"], name="costs_segment_unrolled", condition=Q(rolled=False))]

    def __str__(self) -> str:
        return f"#{self.job_id} attempt {self.attempt_number}: {self.devices} {self.flavor_id}"


class UsageDay(models.Model):
    """The part of one closed segment inside one UTC day, priced when it was rolled (prices of the past never
    change, so neither does this). Reports sum these and price what is not rolled yet from the segments."""

    segment = models.ForeignKey(UsageSegment, on_delete=models.CASCADE, related_name="days", db_index=False)
    day = models.DateField()
    organization_id = models.BigIntegerField()
    project_id = models.BigIntegerField()
    user_id = models.BigIntegerField(null=True)
    job_id = models.BigIntegerField(null=True)
    experiment = models.CharField(max_length=200, blank=True)
    stage = models.CharField(max_length=10)
    flavor_id = models.BigIntegerField()
    cluster_id = models.BigIntegerField(null=True)
    priority_class_id = models.BigIntegerField()
    outcome = models.CharField(max_length=10, blank=True)
    labels = models.JSONField(default=dict, blank=True, help_text="Its segment's: reports group by any label key.")
    device_seconds = models.BigIntegerField()
    cpu_seconds = models.BigIntegerField(help_text="CPU core-seconds.")
    memory_seconds = models.BigIntegerField(db_default=0, help_text="MiB-seconds of memory requested.")
    # Money in micro-units of the currency (whole numbers): reports add them exactly, in SQL, on any database.
    cost_micros = models.BigIntegerField(help_text="Everything the piece cost (devices or CPU, and memory), in "
                                                   "millionths of the currency.")
    memory_cost_micros = models.BigIntegerField(db_default=0, help_text="The part of `cost_micros` its memory cost.")

    class Meta:
        ordering = ["day", "id"]
        constraints = [models.UniqueConstraint(fields=["segment", "day"], name="one_usage_day_per_segment")]
        indexes = [models.Index(fields=["day"], name="costs_usageday_day"),
                   models.Index(fields=["project_id", "day"], name="costs_usageday_project_day")]

    def __str__(self) -> str:
        return f"segment {self.segment_id} on {self.day}"


class EffectiveDated(models.Model):
    """A value in force from `effective_from` until the next row of the same key. Rows whose date has passed are
    history: they are never changed or deleted (`costs.services`), so a report of the past never changes."""

    effective_from = models.DateTimeField()
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        abstract = True


class DevicePrice(EffectiveDated):
    flavor = models.ForeignKey("quotas.ResourceFlavor", on_delete=models.PROTECT, related_name="prices")
    cluster = models.ForeignKey("clusters.Cluster", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="prices", help_text="Empty: every cluster without its own price.")
    per_device_hour = models.DecimalField(max_digits=12, decimal_places=4, validators=[MinValueValidator(0)])

    class Meta:
        ordering = ["flavor__name", "cluster__name", "effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["flavor", "cluster", "effective_from"], name="one_device_price_per_date"),
            models.UniqueConstraint(fields=["flavor", "effective_from"], condition=Q(cluster__isnull=True),
                                    name="one_flavor_price_per_date"),
        ]

    def __str__(self) -> str:
        where = f" on {self.cluster}" if self.cluster_id else ""
        return f"{self.flavor}{where}: {self.per_device_hour}/device-hour from {self.effective_from:%Y-%m-%d %H:%M}"


class CpuPrice(EffectiveDated):
    """The price of a CPU core-hour, for jobs that hold no accelerator."""

    per_core_hour = models.DecimalField(max_digits=12, decimal_places=4, validators=[MinValueValidator(0)])

    class Meta:
        ordering = ["effective_from"]
        constraints = [models.UniqueConstraint(fields=["effective_from"], name="one_cpu_price_per_date")]

    def __str__(self) -> str:
        return f"{self.per_core_hour}/core-hour from {self.effective_from:%Y-%m-%d %H:%M}"


class MemoryPrice(EffectiveDated):
    """The price of a GiB-hour of memory requested, per flavor, optionally per cluster (a cluster's own price wins
    from its first date on), as device prices are. Billed from every segment's memory request, devices or not."""

    flavor = models.ForeignKey("quotas.ResourceFlavor", on_delete=models.PROTECT, related_name="memory_prices")
    cluster = models.ForeignKey("clusters.Cluster", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="memory_prices", help_text="Empty: every cluster without its own price.")
    per_gib_hour = models.DecimalField(max_digits=12, decimal_places=4, validators=[MinValueValidator(0)])

    class Meta:
        ordering = ["flavor__name", "cluster__name", "effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["flavor", "cluster", "effective_from"], name="one_memory_price_per_date"),
            models.UniqueConstraint(fields=["flavor", "effective_from"], condition=Q(cluster__isnull=True),
                                    name="one_flavor_memory_price_per_date"),
        ]

    def __str__(self) -> str:
        where = f" on {self.cluster}" if self.cluster_id else ""
        return f"{self.flavor}{where}: {self.per_gib_hour}/GiB-hour from {self.effective_from:%Y-%m-%d %H:%M}"


class ClassDiscount(EffectiveDated):
    """What a priority class pays of the price: 0.3 for preemptible capacity sold at 70% off."""

    priority_class = models.ForeignKey("quotas.PriorityClass", on_delete=models.PROTECT, related_name="discounts")
    factor = models.DecimalField(max_digits=5, decimal_places=4,
                                 validators=[MinValueValidator(0), MaxValueValidator(1)])

    class Meta:
        ordering = ["priority_class__name", "effective_from"]
        constraints = [models.UniqueConstraint(fields=["priority_class", "effective_from"],
                                               name="one_class_discount_per_date")]

    def __str__(self) -> str:
        return f"{self.priority_class}: x{self.factor} from {self.effective_from:%Y-%m-%d %H:%M}"


class TidalRate(EffectiveDated):
    """What devices on tidal capacity (lent by a pool, docs/pools.md) pay of the price, instead of their priority
    class's factor: 0.2 for capacity that may be taken back within a give-back."""

    factor = models.DecimalField(max_digits=5, decimal_places=4,
                                 validators=[MinValueValidator(0), MaxValueValidator(1)])

    class Meta:
        ordering = ["effective_from"]
        constraints = [models.UniqueConstraint(fields=["effective_from"], name="one_tidal_rate_per_date")]

    def __str__(self) -> str:
        return f"tidal capacity: x{self.factor} from {self.effective_from:%Y-%m-%d %H:%M}"


def default_thresholds() -> list[int]:
    return [50, 80, 100]


def validate_thresholds(value: object) -> None:
    """Percents of the monthly amount at which to alert: whole numbers from 1 to 1000, strictly ascending."""
    if not isinstance(value, list):
        raise ValidationError("A list of percents, e.g. [50, 80, 100].")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= 1000:
            raise ValidationError(f"{item!r} is not a whole percent from 1 to 1000.")
    if any(a >= b for a, b in zip(value, value[1:], strict=False)):
        raise ValidationError("Percents must be ascending, each once (e.g. [50, 80, 100]).")


class Budget(models.Model):
    """What a project may spend per calendar month (UTC), in `TIDAL_CURRENCY`. Crossing a threshold alerts once a
    month (`BudgetAlert`); a hard budget, once spent, stops the scheduler admitting the project's non-preemptible
    jobs until the month ends or the amount is raised (`costs.budgets.hard_stop`)."""

    project = models.OneToOneField("tenancy.Project", on_delete=models.CASCADE, related_name="budget")
    amount = models.DecimalField(max_digits=14, decimal_places=2, validators=[MinValueValidator(0)],
                                 help_text="Per calendar month (UTC), in the platform's currency.")
    thresholds = models.JSONField(default=default_thresholds, blank=True, validators=[validate_thresholds],
                                  help_text="Percents of the amount that alert once a month, ascending.")
    hard = models.BooleanField(default=False, help_text="Once spent, only preemptible jobs are admitted.")

    class Meta:
        ordering = ["project__slug"]

    def __str__(self) -> str:
        return f"budget of {self.project}: {self.amount}/month{' (hard)' if self.hard else ''}"


class OrganizationBudget(models.Model):
    """What an organization's projects together may spend per calendar month (UTC), beside each project's own
    budget. Alerts as a project's do (`ScopedBudgetAlert`); a hard one, once spent, stops the scheduler admitting
    the non-preemptible jobs of every project of the organization. Platform staff write it; every member of one of
    its projects reads it."""

    organization = models.OneToOneField("tenancy.Organization", on_delete=models.CASCADE, related_name="budget")
    amount = models.DecimalField(max_digits=14, decimal_places=2, validators=[MinValueValidator(0)],
                                 help_text="Per calendar month (UTC), in the platform's currency.")
    thresholds = models.JSONField(default=default_thresholds, blank=True, validators=[validate_thresholds],
                                  help_text="Percents of the amount that alert once a month, ascending.")
    hard = models.BooleanField(default=False, help_text="Once spent, only preemptible jobs are admitted.")

    class Meta:
        ordering = ["organization__name"]

    def __str__(self) -> str:
        return f"budget of {self.organization}: {self.amount}/month{' (hard)' if self.hard else ''}"


class UserBudget(models.Model):
    """What one user's jobs may spend per calendar month (UTC), in every project together. A hard one, once spent,
    stops the scheduler admitting that user's non-preemptible jobs only. Platform staff write it; the user reads
    their own."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="cost_budget")
    amount = models.DecimalField(max_digits=14, decimal_places=2, validators=[MinValueValidator(0)],
                                 help_text="Per calendar month (UTC), in the platform's currency.")
    thresholds = models.JSONField(default=default_thresholds, blank=True, validators=[validate_thresholds],
                                  help_text="Percents of the amount that alert once a month, ascending.")
    hard = models.BooleanField(default=False, help_text="Once spent, only the user's preemptible jobs are admitted.")

    class Meta:
        ordering = ["user__username"]

    def __str__(self) -> str:
        return f"budget of {self.user}: {self.amount}/month{' (hard)' if self.hard else ''}"


class ScopedBudgetAlert(models.Model):
    """A threshold of an organization's or a user's budget crossed in a month; the unique constraints make the
    insert the arbiter, as `BudgetAlert` does for projects."""

    organization = models.ForeignKey("tenancy.Organization", null=True, blank=True, on_delete=models.CASCADE,
                                     related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+")
    month = models.DateField(help_text="First day of the month.")
    threshold = models.PositiveIntegerField(help_text="Percent of the amount.")
    amount = models.DecimalField(max_digits=14, decimal_places=2, help_text="The budget then.")
    cost = models.FloatField(help_text="What had been spent in the month then.")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-month", "threshold"]
        constraints = [
            models.CheckConstraint(condition=Q(organization__isnull=True) ^ Q(user__isnull=True),
                                   name="scoped_budget_alert_of_one_scope"),
            models.UniqueConstraint(fields=["organization", "month", "threshold"],
                                    condition=Q(organization__isnull=False),
                                    name="one_organization_budget_alert_per_threshold_and_month"),
            models.UniqueConstraint(fields=["user", "month", "threshold"], condition=Q(user__isnull=False),
                                    name="one_user_budget_alert_per_threshold_and_month"),
        ]

    def __str__(self) -> str:
        who = f"organization {self.organization_id}" if self.organization_id else f"user {self.user_id}"
        return f"{who}: {self.threshold}% of {self.month:%Y-%m}"


class BudgetAlert(models.Model):
    """A threshold crossed in a month. The unique constraint makes the insert the arbiter: checks running at once
    (beat, an embedded loop, a second worker) alert and notify exactly once."""

    project = models.ForeignKey("tenancy.Project", on_delete=models.CASCADE, related_name="budget_alerts",
                                db_index=False)
    month = models.DateField(help_text="First day of the month.")
    threshold = models.PositiveIntegerField(help_text="Percent of the amount.")
    amount = models.DecimalField(max_digits=14, decimal_places=2, help_text="The budget then.")
    cost = models.FloatField(help_text="What the project had spent in the month then.")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-month", "threshold"]
        constraints = [models.UniqueConstraint(fields=["project", "month", "threshold"],
                                               name="one_budget_alert_per_threshold_and_month")]

    def __str__(self) -> str:
        return f"{self.project_id}: {self.threshold}% of {self.month:%Y-%m}"


class SpendAnomalyRule(models.Model):
    """A project's own terms for spend anomaly alerts (`costs.budgets.anomalies`): a day's spend over `multiple` x
    the median of the `trailing_days` days before it alerts. A project without one alerts on the platform's
    defaults (`TIDAL_COST_ANOMALY_MULTIPLE`, `TIDAL_COST_ANOMALY_TRAILING_DAYS`); `enabled` off silences it."""

    project = models.OneToOneField("tenancy.Project", on_delete=models.CASCADE, related_name="spend_anomaly_rule")
    multiple = models.DecimalField(max_digits=6, decimal_places=2,
                                   validators=[MinValueValidator(Decimal("1.01")), MaxValueValidator(1000)],
                                   help_text="A day over this multiple of the trailing median alerts (above 1).")
    trailing_days = models.PositiveSmallIntegerField(default=14, validators=[MinValueValidator(3),
                                                                             MaxValueValidator(90)],
                                                     help_text="Days before it whose median is the baseline.")
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["project__slug"]

    def __str__(self) -> str:
        return f"{self.project}: x{self.multiple} of {self.trailing_days} days' median"


class SpendAnomalyAlert(models.Model):
    """A day whose spend went over the multiple of its trailing median: alerted once per project and day (the
    unique constraint is the arbiter between checks running at once)."""

    project = models.ForeignKey("tenancy.Project", on_delete=models.CASCADE, related_name="spend_anomalies",
                                db_index=False)
    day = models.DateField()
    spent = models.DecimalField(max_digits=16, decimal_places=4, help_text="The day's spend when it alerted.")
    median = models.DecimalField(max_digits=16, decimal_places=4, help_text="The median of the trailing days.")
    multiple = models.DecimalField(max_digits=6, decimal_places=2)
    trailing_days = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-day", "project_id"]
        constraints = [models.UniqueConstraint(fields=["project", "day"], name="one_spend_anomaly_per_project_day")]

    def __str__(self) -> str:
        return f"{self.project_id}: {self.spent} on {self.day} (median {self.median})"
