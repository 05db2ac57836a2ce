"""Who did something, as the audit log and job events name them."""

from __future__ import annotations

from typing import Any

SYSTEM = "system"


def actor_name(actor: Any) -> str:
    """A user's name, or the name of a component acting on its own ("scheduler", "backend", "system")."""
    if isinstance(actor, str):
        return actor
    if actor is not None and getattr(actor, "is_authenticated", False):
        return actor.get_username()
    return SYSTEM
