"""Writes for pools (platform staff) and their demand (a pool token). Every door comes through here: each staff
write is validated, audited, and wakes the scheduler once it committed, as a changed demand does."""

from __future__ import annotations

import secrets
from typing import Any

from django.db import transaction
from django.utils import timezone

from core import wakeup
from core.errors import DomainError
from jobs import ports
from jobs.scheduling.model import split_node_key
from pools.models import Pool, PoolToken
from pools.source import pool_nodes
from tenancy.audit import audit_record, delete_audited, save_audited
from tenancy.models import hash_token

POOL_FIELDS = ("name", "cluster", "flavor", "node_pattern", "devices", "headroom_percent", "headroom_floor",
               "time_zone", "schedule", "schedule_floor", "use_foreign_pods", "pending_without_selector",
               "use_forecast", "lending", "interference_cooldown")
TOKEN_PREFIX = "tdp_"  # noqa: S105  (the visible prefix of every pool token, not a secret)
MAX_DEMAND = 1_000_000


@transaction.atomic
def pool_save(*, actor: Any, pool: Pool, values: dict[str, Any] | None = None) -> Pool:
    """Create or change a pool (`values` on top of what `pool` already holds)."""
    for name, value in (values or {}).items():
        setattr(pool, name, value)
    _refuse_shared_nodes(pool)
    save_audited(actor=actor, obj=pool, fields=POOL_FIELDS)
    transaction.on_commit(wakeup.wake_scheduler)
    return pool


def _refuse_shared_nodes(pool: Pool) -> None:
    """A node lends for one pool: a pool taking another's node is refused, naming the field that chose it."""
    if pool.cluster_id is None or pool.flavor_id is None:
        return  # the model's own rules name the missing field
    nodes = ports.inventory().nodes
    mine = {n.name for n in pool_nodes(pool, nodes)}
    for other in Pool.objects.filter(cluster_id=pool.cluster_id).exclude(pk=pool.pk).select_related("cluster",
                                                                                                     "flavor"):
        shared = sorted(mine & {n.name for n in pool_nodes(other, nodes)})
        if shared:
            raise DomainError(f"Node {split_node_key(shared[0])[1]} already lends for pool {other.name}.",
                              field="node_pattern" if pool.node_pattern else "devices")


@transaction.atomic
def pool_delete(*, actor: Any, pool: Pool) -> None:
    delete_audited(actor=actor, obj=pool, fields=("name", "cluster"))
    transaction.on_commit(wakeup.wake_scheduler)


@transaction.atomic
def token_create(*, actor: Any, pool: Pool, name: str) -> tuple[PoolToken, str]:
    """A new pool token and its secret (shown once: only its digest is kept)."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = PoolToken.objects.create(pool=pool, name=name, prefix=secret[:12], digest=hash_token(secret))
    audit_record(actor=actor, action="pooltoken.create", target=token, changes={"pool": pool.name, "name": name})
    return token, secret


@transaction.atomic
def token_revoke(*, actor: Any, token: PoolToken) -> None:
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    audit_record(actor=actor, action="pooltoken.revoke", target=token, changes={"pool": token.pool.name})


def pool_for_token(secret: str) -> Pool | None:
    """The pool an unrevoked token puts the demand of."""
    token = PoolToken.objects.select_related("pool").filter(digest=hash_token(secret), revoked_at=None).first()
    return None if token is None else token.pool


@transaction.atomic
def demand_set(*, pool: Pool, devices: Any) -> Pool:
    """Serving's demand in devices, as its autoscaler reports it. Only a change is written (and wakes the
    scheduler): the time it changed is when a give-back it causes began."""
    if isinstance(devices, bool) or not isinstance(devices, int) or not 0 <= devices <= MAX_DEMAND:
        raise DomainError(f"A whole number of devices from 0 to {MAX_DEMAND}.", field="devices")
    if pool.demand != devices:
        Pool.objects.filter(pk=pool.pk).update(demand=devices, demand_at=timezone.now())
        pool.refresh_from_db(fields=["demand", "demand_at"])
        transaction.on_commit(wakeup.wake_scheduler)
    return pool
