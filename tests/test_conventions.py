"""Project conventions enforced as tests.

1. API, view, serializer and form modules never touch `<Model>.objects` directly: they read through selectors,
   which scope every query to what the caller may see.
2. The scheduler core (`jobs/scheduling/`), the replay engine (`replay/`), tracking's series code (`tracking/series/`),
   cost pricing (`costs/metering/pricing.py`) and the failure diagnosis rules (`reliability/rules.py`) are pure: no
   Django, ORM or Kubernetes imports, not even through what they import (mypy checks their types: `make lint`).
3. Only one module imports the `kubernetes` client.
4. Only the state machine (`jobs/lifecycle.py`) writes `Job.state` and attempt rows.
5. Dependencies between apps run one way: core <- tenancy <- notifications <- quotas <- jobs <- clusters, replay,
   tracking <- costs <- replays, reliability; the composition root (mlplatform) may import every app, and no app
   imports it.
6. Apps connect to each other (core.hooks, Django signals) in their AppConfig.ready(), never as the side effect of an
   import.
7. A whole number is recognised as ASCII digits, by `core.digits` (the server) or `tidal_cli.digits` (the CLI and
   SDK), never by `str.isdigit()` and its kin, which accept digits `int()` refuses ("²").
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ["tenancy", "notifications", "quotas", "jobs", "clusters", "replay", "replays", "tracking", "costs",
        "reliability", "pools", "serving"]
# Each app may import only apps of a lower layer (and itself): siblings do not import each other.
# Notifications sit under every app that alerts (the webhooks' model, tracking's, fills its registration point).
LAYERS = {"core": 0, "tenancy": 1, "notifications": 2, "quotas": 3, "jobs": 4, "clusters": 5, "replay": 5,
          "tracking": 5, "telemetry": 6, "pools": 6, "costs": 7, "replays": 8, "reliability": 8, "serving": 7,
          "mlplatform": 9}
STATE_WRITER = "jobs/lifecycle.py"
WRITE_METHODS = {"update", "create", "bulk_create", "get_or_create", "update_or_create", "bulk_update", "save"}
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
    return top_level_imports(path.read_text())


def top_level_imports(source: str) -> set[str]:
    """The top-level packages `source` imports, anywhere in it (inside functions too)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def app_modules() -> list[tuple[str, Path]]:
    """(app, path) of every Python module of the project's packages."""
    return [(app, path) for app in LAYERS for path in sorted((ROOT / app).rglob("*.py"))]


def wrong_way_imports(app: str, source: str) -> set[str]:
    """Apps that `source` (a module of `app`) imports against the layering."""
    return {other for other in top_level_imports(source) & set(LAYERS)
            if other != app and LAYERS[other] >= LAYERS[app]}


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def state_writes(source: str) -> list[str]:
    """Lines of `source` that write a job's state or an attempt row: `x.state = ...` (but `self.state`), a write
    call passing `state=`, a bulk write naming the "state" field, or a write call or constructor of `Attempt`."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute) and t.attr == "state" and not _mentions(t.value, "self")
                   for t in targets):
                hits.append(node.lineno)
        elif isinstance(node, ast.Call) and _writes_state_or_attempt(node):
            hits.append(node.lineno)
    return sorted(set(hits))


def _writes_state_or_attempt(call: ast.Call) -> bool:
    func = call.func
    method = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    passes_state = any(k.arg == "state" for k in call.keywords)
    names_state = any(isinstance(c, ast.Constant) and c.value == "state" for a in call.args for c in ast.walk(a))
    return ((method in WRITE_METHODS or method in ("bulk_set", "Job")) and passes_state
            or method in ("bulk_set", "bulk_update") and names_state
            or method in WRITE_METHODS and _mentions(func, "Attempt")
            or method == "Attempt")


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


FRAMEWORKS = {"django", "kubernetes", "rest_framework", "celery", "redis", "psycopg"}
PURE_MODULES = ["jobs.scheduling", "replay", "tracking.series", "costs.metering.pricing", "reliability.rules",
                "jobs.failures"]  # mypy checks these too


@pytest.mark.parametrize("package", ["jobs/scheduling", "replay", "tracking/series", "reliability/rules.py"])
def test_pure_packages_import_no_framework(package):
    modules = sorted((ROOT / package).rglob("*.py")) if (ROOT / package).is_dir() else [ROOT / package]
    assert modules, f"{package} is missing"
    for path in modules:
        assert not imported_modules(path) & FRAMEWORKS, f"{path} imports {imported_modules(path) & FRAMEWORKS}"


def frameworks_loaded_by(modules: list[str]) -> list[str]:
    """The frameworks a fresh interpreter has loaded after importing `modules` (and whatever they import)."""
    probe = (f"import importlib, sys\nfor name in {modules!r}: importlib.import_module(name)\n"
             f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(FRAMEWORKS)!r}))))")
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True).stdout.split()


def test_pure_packages_load_no_framework_even_through_what_they_import():
    """Whatever module of the project they go through (replay reaches jobs.scheduling and core), importing them pulls
    in no framework; the probe itself sees one pulled in through a lower module."""
    assert frameworks_loaded_by(PURE_MODULES) == []
    assert frameworks_loaded_by(["core.redis"]) == ["django"]


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
    one, two = JobDetailSerializer(Job()), JobDetailSerializer(Job())
    assert one.fields["groups"].child is not two.fields["groups"].child
    assert one.fields["groups"].child.parent is one.fields["groups"]
    a, b = JobSubmitSerializer(data={}), JobSubmitSerializer(data={})
    assert a.fields["groups"].child is not b.fields["groups"].child
    assert a.fields["groups"].child.parent is a.fields["groups"]
    assert a.fields["command"].child is not b.fields["command"].child
    assert a.fields["command"].child.parent is a.fields["command"]
    assert a.fields["groups"].child.fields["flavor"] is not b.fields["groups"].child.fields["flavor"]


def test_the_state_checker_catches_every_way_of_writing_state():
    """The test of the test: each planted write is found; reads, filters and other objects' state are not."""
    planted = {
        "job.state = 'running'\n": [1],
        "Job.objects.filter(pk=1).update(state='failed')\n": [1],
        "Job(name='x', state='running')\n": [1],
        "bulk_set(Job, ['state', 'eta'], rows)\n": [1],
        "Job.objects.bulk_update(jobs, ['state'])\n": [1],
        "Attempt.objects.filter(pk=1).update(ended_at=now)\n": [1],
        "Attempt.objects.create(job=job, number=1)\n": [1],
        "x = Attempt(job=job)\n": [1],
        "Job.objects.filter(state='queued').count()\nself.state = CycleState()\nrun.state\n": [],
        "Attempt.objects.filter(ended_at__isnull=True)\n": [],
    }
    for source, lines in planted.items():
        assert state_writes(source) == lines, source


def test_only_the_state_machine_writes_job_state_and_attempts():
    offenders = {}
    for _, path in app_modules():
        relative = path.relative_to(ROOT).as_posix()
        pure = relative.startswith(("jobs/scheduling/", "replay/"))  # no models: their `state` is their own
        if relative == STATE_WRITER or "/migrations/" in relative or pure:
            continue
        hits = state_writes(path.read_text())
        if hits:
            offenders[relative] = hits
    assert offenders == {}, f"change job state through jobs.lifecycle: {offenders}"
    assert state_writes((ROOT / STATE_WRITER).read_text()), "the state machine itself must show up as a writer"


def test_the_direction_checker_catches_an_import_against_the_layering():
    assert wrong_way_imports("jobs", "from clusters.models import Cluster\n") == {"clusters"}
    assert wrong_way_imports("quotas", "def f():\n    from jobs.models import Job\n") == {"jobs"}
    assert wrong_way_imports("clusters", "import replay.engine\n") == {"replay"}  # siblings stay apart
    assert wrong_way_imports("core", "from tenancy.models import Project\n") == {"tenancy"}
    assert wrong_way_imports("clusters", "from jobs import ports\nfrom core.errors import DomainError\n") == set()
    assert wrong_way_imports("mlplatform", "from clusters import api\n") == set()


def test_dependencies_between_apps_run_one_way():
    offenders = {}
    for app, path in app_modules():
        wrong = wrong_way_imports(app, path.read_text())
        if wrong:
            offenders[path.relative_to(ROOT).as_posix()] = sorted(wrong)
    assert offenders == {}, f"an app imports one above it (or a sibling): {offenders}"


# Costs' rooms (issue 27), one way as apps are: metering is the core, reports read it, budgets and analysis read both.
COSTS_ROOMS = {"metering": 0, "reports": 1, "budgets": 2, "analysis": 2}


def wrong_way_rooms(room: str, source: str) -> set[str]:
    """Rooms of costs that `source` (a module of `room`) imports against their order (or a sibling room)."""
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    rooms = {name.split(".")[1] for name in modules if name.startswith("costs.")}
    return {other for other in rooms & set(COSTS_ROOMS)
            if other != room and COSTS_ROOMS[other] >= COSTS_ROOMS[room]}


def test_the_room_checker_catches_an_import_against_the_order():
    assert wrong_way_rooms("metering", "from costs.reports.usage import Window\n") == {"reports"}
    assert wrong_way_rooms("reports", "from costs import budgets\n") == {"budgets"}
    assert wrong_way_rooms("budgets", "def f():\n    from costs.analysis import Scope\n") == {"analysis"}
    assert wrong_way_rooms("budgets", "from costs.metering.pricing import HOUR\nfrom costs import models\n") == set()


def test_costs_rooms_depend_one_way():
    offenders = {}
    for room in COSTS_ROOMS:
        for path in sorted((ROOT / "costs" / room).rglob("*.py")):
            wrong = wrong_way_rooms(room, path.read_text())
            if wrong:
                offenders[path.relative_to(ROOT).as_posix()] = sorted(wrong)
    assert offenders == {}, f"a room of costs imports one above it (or a sibling): {offenders}"


def test_the_production_requirements_hold_no_test_lint_or_fuzz_package():
    """The Dockerfile installs requirements.txt only: what tests, lint and fuzzing need lives in
    requirements-dev.txt, which adds to it (and `make install` installs), and what compiles the scheduler core in
    requirements-build.txt, which the Dockerfile's build stage and requirements-dev.txt install."""
    def names(path: str) -> set[str]:
        lines = (ROOT / path).read_text().splitlines()
        return {line.split("==")[0].lower() for line in lines if line and not line.startswith(("#", "-r"))}

    dev_only = {"pytest", "pytest-django", "playwright", "hypothesis", "schemathesis", "ruff", "mlflow-skinny"}
    build_only = {"mypy", "setuptools"}
    assert names("requirements.txt") & (dev_only | build_only) == set()
    assert dev_only <= names("requirements-dev.txt")
    assert build_only <= names("requirements-build.txt")
    dev = (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert "-r requirements.txt" in dev and "-r requirements-build.txt" in dev


def test_apps_connect_in_ready_not_by_importing_for_a_side_effect():
    """Every connection between apps is made in an AppConfig.ready() (core.hooks, Django signals), where it can be
    read: no import kept only for what importing it connects, no connecting decorator."""
    found = []
    for _app, path in app_modules():
        source = path.read_text()
        if path.name == "apps.py" and "noqa: F401" in source:
            found.append(f"{path.relative_to(ROOT)}: an import kept for its side effect")
        if re.search(r"^@(receiver|\w+\.on_change|\w+\.after_commit)\b", source, re.MULTILINE):
            found.append(f"{path.relative_to(ROOT)}: connects by a decorator, at import")
    assert found == []


DIGITS_MODULES = {Path("core/digits.py"), Path("sdk/tidal_cli/digits.py")}
NOT_WRITTEN_HERE = {".venv", "node_modules", "var", ".git", ".build", "tests"}
DIGIT_CHECKS = {"isdigit", "isdecimal", "isnumeric"}


def unicode_digit_checks(source: str) -> list[int]:
    """Lines calling `.isdigit()`, `.isdecimal()` or `.isnumeric()`."""
    return sorted({node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
                   and isinstance(node.func, ast.Attribute) and node.func.attr in DIGIT_CHECKS})


def test_the_digit_checker_catches_isdigit_and_its_kin():
    assert unicode_digit_checks("n = int(t) if t.isdigit() else 0\nok = s.isdecimal() or s.isnumeric()\n") == [1, 2]
    assert unicode_digit_checks("ok = is_digits(t)  # not t.isdigit()\n") == []


def test_whole_numbers_are_read_as_ascii_digits_only():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if NOT_WRITTEN_HERE & set(relative.parts) or relative in DIGITS_MODULES:
            continue
        found += [f"{relative}:{line}" for line in unicode_digit_checks(path.read_text())]
    assert found == []
