"""Project conventions enforced as tests.

1. API, view, serializer and form modules never touch `<Model>.objects` directly: they read through selectors,
   which scope every query to what the caller may see.
2. The scheduler core (`jobs/scheduling/`) is pure: no Django, ORM or Kubernetes imports.
3. Only one module imports the `kubernetes` client.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ["tenancy", "quotas", "jobs", "clusters", "replay", "replays"]
SCOPED_MODULE_NAMES = {"api.py", "views.py", "serializers.py", "forms.py"}
UNSCOPED = re.compile(r"\b[A-Z]\w*\.(objects|_default_manager|_base_manager)\b|get_user_model\(\)\.objects")


def unscoped_uses(source: str) -> list[str]:
    """Lines of `source` that query a model manager directly."""
    hits = []
    for number, line in enumerate(source.splitlines(), start=1):
        code = line.split("#", 1)[0]
        if UNSCOPED.search(code):
            hits.append(f"{number}: {line.strip()}")
    return hits


def scoped_modules() -> list[Path]:
    found = []
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if path.name in SCOPED_MODULE_NAMES or path.parent.name in {"api", "views"}:
                found.append(path)
    return found


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_checker_catches_an_unscoped_query():
    """The test of the test: a planted unscoped query must be found, a selector call must not."""
    planted = "def list_jobs(request):\n    return Job.objects.all()\n"
    assert unscoped_uses(planted) == ["2: return Job.objects.all()"]
    assert unscoped_uses("x = get_user_model().objects.get(pk=1)\n")
    assert unscoped_uses("qs = selectors.jobs_for_user(request.user)\n") == []
    assert unscoped_uses("# Job.objects.all() in a comment is fine\n") == []


def test_the_checker_scans_api_and_view_modules():
    names = {path.relative_to(ROOT).as_posix() for path in scoped_modules()}
    assert "tenancy/api.py" in names and "tenancy/views.py" in names


def test_no_unscoped_queries_in_api_and_views():
    offenders = {}
    for path in scoped_modules():
        hits = unscoped_uses(path.read_text())
        if hits:
            offenders[path.relative_to(ROOT).as_posix()] = hits
    assert offenders == {}, f"use a selector instead of querying managers directly: {offenders}"


def test_scheduler_core_is_pure():
    forbidden = {"django", "kubernetes", "rest_framework", "celery", "redis", "psycopg"}
    core = sorted((ROOT / "jobs" / "scheduling").rglob("*.py"))
    assert core, "the scheduler core is missing"
    for path in core:
        assert not imported_modules(path) & forbidden, f"{path} imports {imported_modules(path) & forbidden}"


def test_only_one_module_imports_kubernetes():
    importers = []
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "kubernetes" in imported_modules(path):
                importers.append(path.relative_to(ROOT).as_posix())
    assert len(importers) <= 1, importers


def test_fields_built_once_are_copied_for_every_serializer():
    """FieldsBuiltOnce shares one build per class, never the field objects: each serializer binds its own copies,
    and fields holding children (nested serializers, lists, dicts) get their own children."""
    from jobs.models import Job
    from jobs.serializers import JobDetailSerializer, JobSerializer, JobSubmitSerializer

    first, second = JobSerializer(Job(name="a")), JobSerializer(Job(name="b"))
    assert first.fields["name"] is not second.fields["name"]
    assert first.fields["name"].parent is first and second.fields["name"].parent is second
    assert set(JobDetailSerializer(Job()).fields) > set(first.fields)  # a subclass builds its own set
    a, b = JobSubmitSerializer(data={}), JobSubmitSerializer(data={})
    assert a.fields["groups"].child is not b.fields["groups"].child
    assert a.fields["groups"].child.parent is a.fields["groups"]
    assert a.fields["command"].child is not b.fields["command"].child
    assert a.fields["command"].child.parent is a.fields["command"]
    assert a.fields["groups"].child.fields["flavor"] is not b.fields["groups"].child.fields["flavor"]
