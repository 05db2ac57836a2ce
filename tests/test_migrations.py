"""Every migration can be undone: data migrations carry a reverse (`RunPython.noop` where nothing needs undoing, with
a comment saying why), and the whole project migrates to zero and back on the database the suite runs on (SQLite
locally, PostgreSQL in CI), so a deployment can step back past a release."""

from __future__ import annotations

import json
import math
from graphlib import TopologicalSorter
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import RunPython, RunSQL
from django.db.migrations.operations.base import Operation

from jobs.models import Attempt
from tests.costs.conftest import at
from tests.jobs.conftest import inventory, run, submit  # noqa: F401  (inventory: fixture)
from tracking import services
from tracking.models import PointBlock, Run
from tracking.points import stored_points

ROOT = Path(__file__).resolve().parent.parent


def irreversible(operations: list[Operation]) -> list[str]:
    """The operations that cannot run backwards: RunPython without reverse_code, RunSQL without reverse_sql..."""
    return [operation.describe() for operation in operations if not operation.reversible]


def project_migrations(loader: MigrationLoader) -> dict[tuple[str, str], object]:
    ours = {config.label for config in apps.get_app_configs() if Path(config.path).is_relative_to(ROOT)}
    return {key: migration for key, migration in loader.disk_migrations.items() if key[0] in ours}


def unapply_order(loader: MigrationLoader) -> list[str]:
    """Every app with migrations, each after the apps whose migrations depend on it."""
    depends: dict[str, set[str]] = {}
    for app, name in loader.disk_migrations:
        parents = loader.graph.node_map[app, name].parents
        depends.setdefault(app, set()).update(parent.key[0] for parent in parents if parent.key[0] != app)
    return list(reversed(list(TopologicalSorter(depends).static_order())))


def test_the_checker_finds_a_data_migration_without_a_reverse():
    def forwards(apps, schema_editor):
        pass

    planted = [RunPython(forwards), RunSQL("UPDATE x SET y = 1"), RunPython(forwards, RunPython.noop),
               RunSQL("UPDATE x SET y = 1", reverse_sql=RunSQL.noop)]
    assert irreversible(planted) == ["Raw Python operation", "Raw SQL operation"]


def test_every_migration_of_the_project_can_be_reversed():
    migrations = project_migrations(MigrationLoader(None, ignore_no_migrations=True))
    assert ("jobs", "0003_attempts") in migrations and ("costs", "0001_initial") in migrations
    offenders = {f"{app}.{name}": irreversible(m.operations) for (app, name), m in migrations.items()}
    assert {key: ops for key, ops in offenders.items() if ops} == {}


@pytest.mark.django_db(transaction=True)
def test_the_whole_project_migrates_to_zero_and_back():
    loader = MigrationLoader(connection)
    order = unapply_order(loader)
    assert order.index("costs") < order.index("jobs") < order.index("tenancy")
    for app in order:
        call_command("migrate", app, "zero", verbosity=0)
    tables = set(connection.introspection.table_names())
    assert not tables & {model._meta.db_table for model in apps.get_models()}, "a table survived migrating to zero"

    call_command("migrate", verbosity=0)
    applied = MigrationLoader(connection).applied_migrations
    assert set(project_migrations(loader)) <= set(applied)
    assert {model._meta.db_table for model in apps.get_models() if model._meta.managed} <= set(
        connection.introspection.table_names())


@pytest.mark.django_db(transaction=True)
def test_unapplying_attempts_puts_each_jobs_attempt_back_in_its_columns(tenant, inventory):  # noqa: F811
    job = run(submit(tenant, inventory["h100"]), inventory["cluster"], ["r1-n1"], now=at(0))

    call_command("migrate", "jobs", "0002", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT cluster_id, placement, admitted_at FROM jobs_job WHERE id = %s", [job.pk])
        cluster_id, placement, admitted_at = cursor.fetchone()
    placement = placement if isinstance(placement, list) else json.loads(placement)
    assert (cluster_id, [row["node"] for row in placement]) == (inventory["cluster"].pk, ["r1-n1"])
    assert admitted_at is not None

    call_command("migrate", verbosity=0)
    attempt = Attempt.objects.get(job_id=job.pk)  # carried over again by the forward migration
    assert (attempt.admitted_at, attempt.placement[0]["node"], attempt.ended_at) == (at(0), "r1-n1", None)


@pytest.mark.django_db(transaction=True)
def test_points_move_into_blocks_and_back(tenant):
    """Rows of points (NaN as NULL) become blocks per series and attempt in step order, and blocks rows again."""
    run_ = services.run_create(project=tenant.project, name="old points")
    services.run_log_batch(run_id=run_.pk, metrics=[{"key": "loss", "value": v, "step": s, "timestamp": 1000 + s}
                                                    for s, v in [(0, 2.0), (1, math.nan), (2, math.inf)]])
    Run.objects.filter(pk=run_.pk).update(attempt=2)  # a second attempt logs step 1 again
    services.run_log_batch(run_id=run_.pk, attempt=2, metrics=[{"key": "loss", "value": 0.5, "step": 1,
                                                                "timestamp": 5000}])
    before = sorted(map(repr, stored_points(run_.pk)))  # repr: NaN equals itself

    call_command("migrate", "tracking", "0004", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT step, attempt, value FROM tracking_point ORDER BY attempt, step")
        assert cursor.fetchall() == [(0, 1, 2.0), (1, 1, None), (2, 1, math.inf), (1, 2, 0.5)]

    call_command("migrate", verbosity=0)
    assert sorted(map(repr, stored_points(run_.pk))) == before
    assert list(PointBlock.objects.filter(series__run=run_).order_by("attempt").values_list(
        "attempt", "first_step", "last_step", "count", "min_timestamp", "max_timestamp")) == [
        (1, 0, 2, 3, 1000, 1002), (2, 1, 1, 1, 5000, 5000)]


@pytest.mark.django_db(transaction=True)
def test_alerts_before_say_how_they_closed_and_ended_runs_close_theirs(tenant):
    """Alerts closed before were closed by their condition; an open alert of a run that ended can no longer clear."""
    from django.db.migrations.executor import MigrationExecutor
    from django.utils import timezone

    from tracking.models import Alert

    running = services.run_create(project=tenant.project, name="running")
    ended = services.run_create(project=tenant.project, name="ended")
    call_command("migrate", "tracking", "0006", verbosity=0)
    old = MigrationExecutor(connection).loader.project_state(("tracking", "0006_default_experiments")).apps
    OldAlert, OldRun = old.get_model("tracking", "Alert"), old.get_model("tracking", "Run")  # noqa: N806
    OldRun.objects.filter(pk=ended.pk).update(status="FAILED", ended_at=timezone.now())
    now = timezone.now()
    for run_id, key, resolved in ((running.pk, "a", None), (running.pk, "b", now), (ended.pk, "c", None)):
        OldAlert.objects.create(run_id=run_id, rule="non_finite", key=key, message="x", opened_at=now,
                                resolved_at=resolved)
    call_command("migrate", verbosity=0)
    alerts = {a.key: a for a in Alert.objects.all()}
    assert (alerts["a"].resolved_at, alerts["a"].resolution) == (None, "")
    assert alerts["b"].resolution == "cleared"
    assert alerts["c"].resolved_at is not None and alerts["c"].resolution == "run_ended"


@pytest.mark.django_db(transaction=True)
def test_rolled_days_money_moves_into_micro_units_and_back(tenant, inventory):  # noqa: F811
    """A day rolled as a float keeps its amount, rounded once to the micro-unit; unapplied, micro-units are floats."""
    from datetime import UTC, datetime
    from decimal import Decimal

    from costs.metering.rollup import roll_segments
    from costs.models import DevicePrice, UsageDay, UsageSegment
    from quotas.models import PriorityClass

    DevicePrice.objects.create(flavor=inventory["h100"], per_device_hour=Decimal("0.0162"),
                               effective_from=datetime(2025, 1, 1, tzinfo=UTC))
    start = int(at(0).timestamp())
    UsageSegment.objects.create(attempt_number=1, organization_id=tenant.project.organization_id,
                                project=tenant.project, flavor=inventory["h100"], stage="other", devices=1,
                                priority_class=PriorityClass.objects.get(name="normal"), cpu_millis=0,
                                start_ts=start, end_ts=start + 1000)
    assert roll_segments(now=at(1)) == 1

    call_command("migrate", "costs", "0006", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT cost, memory_cost FROM costs_usageday")
        assert cursor.fetchall() == [(0.0045, 0.0)]
        cursor.execute("UPDATE costs_usageday SET cost = 0.0135000004")  # a float summed before: 3 x 0.0045
    call_command("migrate", verbosity=0)
    assert list(UsageDay.objects.values_list("cost_micros", "memory_cost_micros")) == [(13_500, 0)]
