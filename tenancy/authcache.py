"""Per-process answers to "who is this token" and "what is this user's role in this project", for the API's hot path.

Every API request asks the first and every submission the second: two queries that were a third of a submission's
cost. An answer is reused only while two things hold:

- the shared epoch it was read under is still current. Saving or deleting a token, membership, project or user
  replaces the epoch (at once and after commit) in the shared cache (Redis when deployed, so every process sees
  it), so a revoked token, a removed member or an archived project take effect on the next request everywhere;
- it is younger than TTL_SECONDS, which bounds what writes that skip model signals (QuerySet.update, raw SQL) can
  leave behind.

Without a reachable shared cache nothing is reused. Callers get their own copy of a cached object, never the
shared one.
"""

from __future__ import annotations

import copy
import logging
import time
import uuid
from typing import Any

from django.core.cache import cache
from django.db import models, transaction

from core import snapshots

logger = logging.getLogger(__name__)

EPOCH_KEY = "tidal:authz-epoch"
TTL_SECONDS = 5.0
MAX_ENTRIES = 10_000


def current_epoch() -> str | None:
    """The shared epoch, created when missing (a fresh or flushed cache); None when the cache is unreachable."""
    try:
        epoch = cache.get(EPOCH_KEY)
        if epoch is None:
            cache.add(EPOCH_KEY, uuid.uuid4().hex, timeout=None)
            epoch = cache.get(EPOCH_KEY)
        return epoch
    except Exception:  # no shared cache: answer from the database every time
        logger.warning("authorization cache epoch unavailable", exc_info=True)
        return None


def _replace_epoch() -> None:
    try:
        cache.set(EPOCH_KEY, uuid.uuid4().hex, timeout=None)
    except Exception:  # entries then expire by TTL
        logger.warning("could not replace the authorization cache epoch", exc_info=True)


def invalidate(**kwargs: Any) -> None:
    """Signal receiver: a token, membership, project or user changed; forget every answer now and again once the
    change commits (a process may read the old row between the two; the second replacement drops that too)."""
    _replace_epoch()
    transaction.on_commit(_replace_epoch)


class AuthCache:
    def __init__(self) -> None:
        self._entries: dict[Any, tuple[str, float, Any]] = {}
        snapshots.forgettable.connect(self)

    def get(self, key: Any, epoch: str | None) -> Any | None:
        """A copy of the answer cached under `epoch` less than TTL_SECONDS ago, else None."""
        entry = self._entries.get(key)
        if epoch is None or entry is None or entry[0] != epoch or time.monotonic() - entry[1] > TTL_SECONDS:
            return None
        return _clone(entry[2])

    def put(self, key: Any, epoch: str | None, value: Any) -> None:
        if epoch is None:
            return
        if len(self._entries) >= MAX_ENTRIES:  # plenty for a process's active callers; a flood starts over
            self._entries.clear()
        self._entries[key] = (epoch, time.monotonic(), _clone(value))

    def forget(self) -> None:
        self._entries.clear()


def _clone(value: Any) -> Any:
    """A copy of a cached answer (model instances with their select_related objects, in tuples) that the caller may
    change freely. A model's own copy gives it its own attributes and state; its field values are immutable here
    (no JSON or array fields on these models). About a quarter of the cost of a deep copy."""
    if isinstance(value, tuple):
        return tuple(_clone(item) for item in value)
    if isinstance(value, models.Model):
        clone = copy.copy(value)
        clone._state.fields_cache = {name: _clone(rel) for name, rel in value._state.fields_cache.items()}
        return clone
    return value


tokens = AuthCache()  # token digest -> ApiToken with its user
memberships = AuthCache()  # (user id, project slug or id) -> (Project, role)
