"""Named policies for replay: the baselines and the production default, all configurations of the one core.

The baselines are not separate schedulers: each is a `Policy` handed to the `run_cycle()` production uses.
"""

from __future__ import annotations

from jobs.scheduling.model import Policy

POLICIES: dict[str, Policy] = {
    # Each project's queue is strictly FIFO: its head blocks it. No borrowing: each project is capped at its
    # guarantee (an isolated partition when the cluster is partitioned, see scenarios.partition_by_project).
    "strict-fifo": Policy(ordering="fifo", blocking="strict", blocking_scope="project", borrowing=False,
                          preemption=False),
    # FIFO, but a job that does not fit is skipped and later jobs may start.
    "fifo-skip": Policy(ordering="fifo", blocking="skip", borrowing=False, preemption=False),
    # Shortest job first by the recorded duration (an oracle the production policy never gets). The head of
    # the duration-ordered queue blocks, as in the reference replay (skipping instead waits 8% less there).
    "sjf": Policy(ordering="sjf", blocking="strict", blocking_scope="project", borrowing=False,
                  preemption=False),
    # One pooled cluster, no quotas at all, one global strict FIFO queue.
    "pooled-fifo": Policy(ordering="fifo", blocking="strict", blocking_scope="global", quotas=False,
                          borrowing=False, preemption=False),
    # What production runs: priority + fair share ordering, backfill, guarantees, borrowing, preemption.
    "production": Policy(),
}  # fmt: skip

ALIASES = {"default": "production", "fifo": "strict-fifo", "pooled": "pooled-fifo"}

# Baselines that model isolated partitions in the reference experiment (each project on its own nodes).
PARTITIONED = frozenset({"strict-fifo", "fifo-skip", "sjf"})


def get_policy(name: str) -> Policy:
    """A policy by name (see POLICIES); raises KeyError listing the known names."""
    key = ALIASES.get(name, name)
    if key not in POLICIES:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}")
    return POLICIES[key]


def canonical_name(name: str) -> str:
    return ALIASES.get(name, name)
