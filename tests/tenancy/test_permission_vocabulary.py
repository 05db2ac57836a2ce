"""One permission vocabulary (tenancy/permissions.py): the rules about roles are written there and called everywhere
else, so a page, a viewset, a service and the MLflow endpoints cannot drift apart.

1. The ranking of roles (`ROLE_RANK`) is read nowhere but in tenancy/permissions.py: everyone else asks
   `role_at_least`, `has_role` or `require_role`.
2. "Members manage their own jobs, admins all" is written only there (`can_manage_job`, `is_submitter_or_admin`).
   The rule cannot be written without comparing a job's owner with the caller, so the check is: outside the
   permissions module no code compares a job's submitter (`.submitter`, `.submitter_id`) or a run's user (a job's
   run is its submitter's: `<run>.user_id`) with anything. (A membership's own user, "anyone may leave a project",
   is a different rule and stays with memberships.)

Both checks read the syntax tree, so comments, docstrings and strings never trip them; each proves on a sample that
it would catch what it forbids.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VOCABULARY = ROOT / "tenancy" / "permissions.py"
NOT_SOURCE = {".venv", "node_modules", "tests", ".git", "var"}  # var/: data, and the benches' own environments
JOB_OWNERS = {"submitter", "submitter_id"}


def source_files() -> list[Path]:
    """Every Python module of the project but its tests (and what is installed, not written here)."""
    return [path for path in sorted(ROOT.rglob("*.py"))
            if not NOT_SOURCE & set(path.relative_to(ROOT).parts[:-1])]


def _reads_rank(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return any(alias.name == "ROLE_RANK" for alias in node.names)
    return (isinstance(node, ast.Name) and node.id == "ROLE_RANK") or (
        isinstance(node, ast.Attribute) and node.attr == "ROLE_RANK")


def rank_reads(source: str) -> list[int]:
    """Lines that import or read `ROLE_RANK`."""
    return sorted({node.lineno for node in ast.walk(ast.parse(source)) if _reads_rank(node)})


def _names_a_run(node: ast.expr) -> bool:
    """Whether the expression is, by its name, a run (`run`, `self.run`, `found_run`...)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "run" in name.lower()


def _is_job_owner(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and (
        node.attr in JOB_OWNERS or (node.attr == "user_id" and _names_a_run(node.value)))


def job_owner_comparisons(source: str) -> list[int]:
    """Lines that compare a job's submitter, or a run's user, with something."""
    return sorted({node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Compare)
                   and any(_is_job_owner(side) for side in [node.left, *node.comparators])})


def offenders(check) -> list[str]:
    found = []
    for path in source_files():
        if path == VOCABULARY:
            continue
        found += [f"{path.relative_to(ROOT)}:{line}" for line in check(path.read_text())]
    return found


def test_the_scan_covers_the_apps_and_not_the_tests():
    scanned = {path.relative_to(ROOT).as_posix() for path in source_files()}
    for module in ("jobs/views.py", "tracking/mlflow/selectors.py", "costs/budgets/views.py", "tenancy/scoping.py"):
        assert module in scanned
    assert not any(name.startswith(("tests/", ".venv/")) for name in scanned)


def test_the_rank_check_catches_a_read_and_an_import():
    sample = ("from tenancy.permissions import ROLE_RANK\n"
              "ok = ROLE_RANK[role] >= 2\n"
              "also = permissions.ROLE_RANK\n"
              "# ROLE_RANK in a comment\n"
              "text = 'ROLE_RANK'\n")
    assert rank_reads(sample) == [1, 2, 3]


def test_role_ranks_are_read_only_by_the_permissions_module():
    assert offenders(rank_reads) == [], "compare roles with tenancy.permissions (role_at_least, has_role, ...)"


def test_the_rule_check_catches_the_rule_written_inline():
    sample = ("def can_manage(request, job, role):\n"
              "    return role == 'admin' or job.submitter_id == request.user.pk\n"
              "def writes(run, user, role):\n"
              "    return run.user_id != user.pk and role != 'admin'\n"
              "def mine(job, user):\n"
              "    return user == job.submitter\n"
              "def leaving(membership, user):\n"
              "    return membership.user_id == user.pk\n")
    assert job_owner_comparisons(sample) == [2, 4, 6]


def test_who_manages_a_job_is_decided_only_by_the_permissions_module():
    assert offenders(job_owner_comparisons) == [], "ask tenancy.permissions.can_manage_job (or is_submitter_or_admin)"
