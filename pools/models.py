"""Tidal pools: capacity online serving owns (nodes of one flavor on one cluster) and lends to training while it does
not need it. What serving demands comes from its sources (demand.py); the scheduler core lends the rest
(jobs/scheduling/pools.py)."""

from __future__ import annotations

import re
from zoneinfo import available_timezones

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models
from django.utils import timezone

from tenancy.models import is_slug

WINDOW = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


def validate_windows(value: object) -> None:
    """A list of "HH:MM-HH:MM" local times; one that ends before it starts runs past midnight."""
    if not isinstance(value, list) or not all(isinstance(w, str) and WINDOW.match(w) for w in value):
        raise ValidationError('A list of "HH:MM-HH:MM" windows in the pool\'s time zone, e.g. ["22:00-08:00"].')
    if any(w[:5] == w[6:] for w in value):
        raise ValidationError("A window must not start and end at the same minute.")


def validate_time_zone(value: str) -> None:
    if value not in available_timezones():
        raise ValidationError(f"Unknown time zone {value!r} (an IANA name, e.g. Europe/Berlin).")


def validate_slug(value: str) -> None:
    if not is_slug(value):
        raise ValidationError("Lowercase letters, digits and hyphens, starting with a letter.")


class Pool(models.Model):
    name = models.CharField(max_length=63, unique=True, validators=[validate_slug])
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="pools")
    flavor = models.ForeignKey("quotas.ResourceFlavor", on_delete=models.PROTECT, related_name="pools")
    node_pattern = models.CharField(
        max_length=200, blank=True, help_text="Glob on node names (e.g. `serve-*`): the pool is these nodes of the "
        "flavor. Empty: the last nodes of the flavor (by position) that hold `devices`.")
    devices = models.PositiveIntegerField(
        null=True, blank=True, help_text="With no node pattern: how many devices the pool holds (whole nodes).")
    headroom_percent = models.PositiveIntegerField(
        default=10, validators=[MaxValueValidator(100)], help_text="Kept unlent on top of demand, as a percent of it.")
    headroom_floor = models.PositiveIntegerField(default=0, help_text="Devices kept unlent at least.")
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])
    schedule = models.JSONField(
        default=list, blank=True, validators=[validate_windows],
        help_text='Windows when serving needs only the schedule floor, e.g. ["22:00-08:00"] (local time); outside '
        "them the schedule demands every device. Empty: no schedule.")
    schedule_floor = models.PositiveIntegerField(default=0, help_text="Devices serving keeps inside the windows.")
    use_foreign_pods = models.BooleanField(
        default=True, help_text="Count pods Tidal did not create on the pool's nodes (KServe, vLLM...) as demand, and "
        "their pending pods that ask for the pool's devices and whose node selector admits one of its nodes.")
    pending_without_selector = models.BooleanField(
        default=False, help_text="With foreign pods: count pending pods without a node selector or required affinity "
        "(they would run on any node) as this pool's demand too.")
    use_forecast = models.BooleanField(
        default=False, help_text="Keep for serving what it demanded over the coming give-back time on past days "
        "(the pool's own history): lending stops before a rise that comes every day.")
    lending = models.BooleanField(default=True, help_text="Off: the pool lends nothing, whatever its demand.")
    interference_cooldown = models.PositiveIntegerField(
        default=900, help_text="Seconds a node lends nothing after serving reported a p99 latency over its SLO there "
        "(interference.py): training on it is moved off at once.")
    # The demand API's last value (PUT /api/v1/pools/<name>/demand/); null: the API is not a source.
    demand = models.PositiveIntegerField(null=True, blank=True)
    demand_at = models.DateTimeField(null=True, blank=True, help_text="When the demand API's value last changed.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if not self.node_pattern and not self.devices:
            raise ValidationError({"devices": "Give a node pattern or a number of devices."})


class PoolToken(models.Model):
    """A token the serving autoscaler puts a pool's demand with. Only the SHA-256 of the secret is stored."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.pool}: {self.name} ({self.prefix}…)"


class GiveBack(models.Model):
    """One give-back: from the demand change that left training holding more than the pool lends to the cycle
    that saw it hold no more."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="give_backs")
    started_at = models.DateTimeField(db_index=True)
    freed_at = models.DateTimeField(null=True, blank=True)
    devices = models.PositiveIntegerField(help_text="What training held beyond what the pool lent when it began.")

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"{self.pool}: {self.devices} from {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def seconds(self) -> float | None:
        return None if self.freed_at is None else (self.freed_at - self.started_at).total_seconds()


class PoolSample(models.Model):
    """The pool's figures at most once a minute (the Pools page's 24 h chart)."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    capacity = models.PositiveIntegerField()
    demand = models.PositiveIntegerField()
    headroom = models.PositiveIntegerField()
    lent = models.PositiveIntegerField(help_text="What training may hold (lendable).")
    used = models.PositiveIntegerField(help_text="What training held.")

    class Meta:
        ordering = ["pool", "at"]
        indexes = [models.Index(fields=["pool", "at"])]

    def __str__(self) -> str:
        return f"{self.pool} at {self.at:%Y-%m-%d %H:%M}"



class Interference(models.Model):
    """Serving reported its p99 latency over its SLO (interference.py): the nodes lend nothing until `until`, and
    training on them was moved off."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="interferences")
    at = models.DateTimeField()
    nodes = models.JSONField(default=list, help_text="Node names; empty: every node of the pool.")
    p99_ms = models.FloatField()
    slo_ms = models.FloatField()
    until = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.pool} at {self.at:%Y-%m-%d %H:%M:%S}: p99 {self.p99_ms:g} ms over {self.slo_ms:g} ms"

    @property
    def why(self) -> str:
        return f"serving p99 {self.p99_ms:g} ms over its SLO {self.slo_ms:g} ms"
