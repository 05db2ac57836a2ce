"""`manage.py check_consistency [--fix] [--json]`: find rows that disagree with each other across apps, and repair
what a machine can (see `core.consistency` and docs/reliability.md).

Exits 0 when everything is consistent, 1 when problems remain (after --fix: those only a person can resolve).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from clusters import consistency as clusters_checks
from core.consistency import Check, Problem
from core.errors import DomainError
from costs import consistency as costs_checks
from jobs import consistency as jobs_checks
from quotas import consistency as quotas_checks
from tenancy.audit import audit_record

logger = logging.getLogger(__name__)

ACTOR = "check_consistency"
# In this order: segments are closed at their attempt's end before a jobs repair ends an attempt (which would close
# them now), and the jobs repairs leave each open attempt either current or closed before the inventory is checked.
CHECKS: list[Check] = [*costs_checks.CHECKS, *jobs_checks.CHECKS, *clusters_checks.CHECKS, *quotas_checks.CHECKS]
# A repair may reveal another (a job requeued leaves an open attempt behind): a few passes settle them.
MAX_PASSES = 3


@dataclass(frozen=True)
class Repair:
    problem: Problem
    done: str  # what the fix did, or why it could not


def find(checks: list[Check]) -> list[Problem]:
    return [problem for check in checks for problem in check()]


def repair(checks: list[Check]) -> list[Repair]:
    """Run each check and repair what it finds before the next check reads, pass after pass until a pass finds
    nothing to repair. Each repair is one transaction with its audit entry."""
    repairs: list[Repair] = []
    for _ in range(MAX_PASSES):
        before = len(repairs)
        for check in checks:
            for problem in list(check()):
                if problem.fix is not None:
                    repairs.append(_apply(problem))
        if len(repairs) == before:
            break
    return repairs


def _apply(problem: Problem) -> Repair:
    assert problem.fix is not None
    try:
        with transaction.atomic():
            done = problem.fix()
            if problem.target is not None:
                audit_record(actor=ACTOR, action=f"consistency.{problem.check}"[:60], target=problem.target,
                             project=problem.project, changes={"problem": problem.message, "repair": done})
    except DomainError as error:  # the row moved under us (a job changed state): the next pass reads it again
        done = f"not repaired: {error}"
    logger.warning("check_consistency repaired %s: %s -> %s", problem.check, problem.message, done)
    return Repair(problem, done)


class Command(BaseCommand):
    help = ("Find jobs, attempts, usage segments, nodes and quotas that disagree; with --fix repair what can be "
            "repaired (audited). Exits 1 while problems remain.")

    def add_arguments(self, parser):
        parser.add_argument("--fix", action="store_true", help="repair what can be repaired, then report the rest")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print one JSON document")

    def handle(self, *args, fix: bool = False, as_json: bool = False, **options) -> None:
        repairs = repair(CHECKS) if fix else []
        remaining = find(CHECKS)
        if as_json:
            self._print_json(repairs, remaining)
        else:
            self._print_text(repairs, remaining, fix)
        if remaining:
            raise CommandError(f"{len(remaining)} consistency problem(s) remain", returncode=1)

    def _print_json(self, repairs: list[Repair], remaining: list[Problem]) -> None:
        self.stdout.write(json.dumps({
            "consistent": not remaining,
            "repaired": [{"check": r.problem.check, "problem": r.problem.message, "repair": r.done} for r in repairs],
            "problems": [{"check": p.check, "problem": p.message, "fixable": p.fix is not None} for p in remaining],
        }, indent=2))

    def _print_text(self, repairs: list[Repair], remaining: list[Problem], fix: bool) -> None:
        for r in repairs:
            self.stdout.write(f"repaired {r.problem.check}: {r.problem.message} -> {r.done}")
        for p in remaining:
            how = "needs a person" if p.fix is None else "--fix repairs it" if not fix else "still there"
            self.stdout.write(f"problem  {p.check}: {p.message} ({how})")
        if not remaining:
            self.stdout.write("consistent")
        else:
            fixable = sum(p.fix is not None for p in remaining)
            self.stdout.write(f"{len(remaining)} problem(s), {fixable} repairable with --fix")
