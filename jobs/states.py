"""The job state machine's table: which transitions are legal. `jobs.lifecycle` applies them."""

from __future__ import annotations

from core.choices import TextChoices


class State(TextChoices):
    QUEUED = "queued", "Queued"
    ADMITTED = "admitted", "Admitted"
    DISPATCHING = "dispatching", "Dispatching"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    PREEMPTED = "preempted", "Preempted"
    RETRYING = "retrying", "Retrying"


FINAL = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED})
# States holding capacity on nodes: the scheduler counts them as running, and an attempt is open in them.
HOLDING = frozenset({State.ADMITTED, State.DISPATCHING, State.RUNNING})
ACTIVE = frozenset(State) - FINAL

TRANSITIONS: dict[str, frozenset[str]] = {
    State.QUEUED: frozenset({State.ADMITTED, State.CANCELLED, State.FAILED}),
    State.ADMITTED: frozenset({State.DISPATCHING, State.PREEMPTED, State.CANCELLED, State.FAILED, State.RETRYING}),
    State.DISPATCHING: frozenset(
        {State.RUNNING, State.PREEMPTED, State.CANCELLED, State.FAILED, State.RETRYING, State.SUCCEEDED}
    ),
    State.RUNNING: frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED, State.PREEMPTED, State.RETRYING}),
    State.PREEMPTED: frozenset({State.QUEUED, State.CANCELLED}),
    State.RETRYING: frozenset({State.QUEUED, State.CANCELLED, State.FAILED}),
    State.SUCCEEDED: frozenset(),
    State.FAILED: frozenset(),
    State.CANCELLED: frozenset(),
}


def can_transition(source: str, target: str) -> bool:
    return target in TRANSITIONS[source]


def ends_attempt(source: str, target: str) -> bool:
    """Leaving the states that hold capacity ends the job's attempt."""
    return source in HOLDING and target not in HOLDING
