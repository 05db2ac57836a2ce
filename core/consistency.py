"""What `manage.py check_consistency` runs: each app states the rules its rows must keep as small checks
(`<app>/consistency.py`), each finding a `Problem`, with a way to repair it when a machine can.

Rows that disagree with each other (a job running without an attempt, a usage segment still open after its attempt
ended) are never written by a transaction that committed; they come from a crash between two systems, a restore
from an old backup, a row edited by hand. The checks find them, the command repairs what it can through the same
code paths the platform itself writes with, and audits every repair.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One disagreement between rows. `fix` repairs it (inside the caller's transaction, re-checking what it
    changes, so a row that moved since the check is left alone) and says what it did; None when only a person can
    decide (the audit entry and the report name `target`, in `project`)."""

    check: str  # "<app>.<rule>", e.g. "jobs.holding_without_attempt"
    message: str
    target: Any = None  # the row the problem is about (a model instance)
    project: Any = None  # its project, for the audit log
    fix: Callable[[], str] | None = None


Check = Callable[[], Iterable[Problem]]
