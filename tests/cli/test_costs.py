"""`tidal costs` against a live server: a table with totals, JSON, streamed CSV, and clear errors."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from costs import services
from costs.models import DevicePrice, UsageSegment
from quotas.models import PriorityClass, ResourceFlavor

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def usage(tenant, demo_cluster):
    h100 = ResourceFlavor.objects.get(name="nvidia-h100-80gb")
    services.price_save(actor=None, price=DevicePrice(flavor=h100, per_device_hour=Decimal("2.5"),
                                                      effective_from=datetime(2025, 1, 1, tzinfo=UTC)),
                        backdate=True)
    start = int(datetime(2026, 1, 10, tzinfo=UTC).timestamp())
    for project, hours in ((tenant.project, 10), (tenant.other_project, 4)):
        UsageSegment.objects.create(attempt_number=1, organization=project.organization, project=project,
                                    flavor=h100, priority_class=PriorityClass.objects.get(name="normal"),
                                    stage="sft", devices=8, cpu_millis=8000, start_ts=start,
                                    end_ts=start + hours * 3600, outcome="succeeded")


def test_costs_shows_a_table_with_totals_json_and_csv(cli, usage):
    shown = cli("costs", "--month", "2026-01", "--by", "project,flavor")
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert re.fullmatch(r"Costs 2026-01-01 to 2026-01-31 \(UTC days\), as of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC "
                        r"\(running jobs count up to it\)", lines[0]), lines[0]
    assert lines[1].split() == ["PROJECT", "FLAVOR", "DEVICE-H", "CPU-H", "MEM-GIB-H", "USD"]
    # 8 x 10 h x 2.5; the segment requests no memory (and memory has no price here)
    assert lines[2].split() == ["vision", "nvidia-h100-80gb", "80.0", "80.0", "0.0", "200.00"]
    assert "secret" not in shown.out
    assert lines[-1].startswith("Total: 200.00 USD, 80.0 device-hours")
    as_json = cli("costs", "--month", "2026-01", "--json").json()
    assert as_json["total"]["cost"] == pytest.approx(200.0)
    rows = list(csv.reader(io.StringIO(cli("costs", "--start", "2026-01-01", "--end", "2026-01-31", "--step", "day",
                                           "--csv").out)))
    assert rows == [["period", "project", "device_hours", "cpu_hours", "memory_gib_hours", "cost_usd",
                     "memory_cost_usd"],
                    ["2026-01-10", "vision", "80.0000", "80.0000", "0.0000", "200.00", "0.00"]]
    unstepped = list(csv.reader(io.StringIO(cli("costs", "--month", "2026-01", "--by", "project,stage", "--csv").out)))
    assert unstepped == [["project", "stage", "device_hours", "cpu_hours", "memory_gib_hours", "cost_usd",
                          "memory_cost_usd"],
                         ["vision", "sft", "80.0000", "80.0000", "0.0000", "200.00", "0.00"]]
    theirs = cli("costs", "--month", "2026-01", user="outsider", token=None)
    assert theirs.code == 0 and "secret" in theirs.out and "vision" not in theirs.out


@pytest.mark.parametrize(("argv", "code", "says"), [
    (("costs", "--by", "colour"), 2, "unknown group 'colour'"),
    (("costs", "--month", "2026-01", "--start", "2026-01-01"), 2, "not both"),
    (("costs", "--start", "2026-01-01"), 2, "both --start and --end"),
    (("costs", "--month", "2026-13"), 1, "month"),
    (("costs", "--start", "2026-02-01", "--end", "2026-01-01"), 1, "ends before it starts"),
    (("costs", "--month", "2026-01", "--project", "secret"), 1, "No project named 'secret'"),
    (("costs", "--csv", "--json"), 2, "give one of them"),
    (("costs", "--by", "project,label:"), 2, "needs a label key"),
    (("costs", "--month", "2026-01", "--by", "label:Bad Key!"), 1, "Label key 'Bad Key!' is not valid"),
    (("costs", "--start", "2026-01-01", "--end", "2026-01-31", "--step", "hour"), 1, "hourly report covers at most"),
])
def test_costs_refuses_bad_arguments_with_a_message(cli, usage, argv, code, says):
    result = cli(*argv)
    assert result.code == code and says in result.err, result.err


def test_costs_groups_by_a_job_label_and_per_hour(cli, usage):
    UsageSegment.objects.filter(project__slug="vision").update(labels={"cost-center": "cc-7"})
    shown = cli("costs", "--month", "2026-01", "--by", "label:cost-center,label:team")
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[1].split()[:2] == ["LABEL:COST-CENTER", "LABEL:TEAM"]
    assert lines[2].split()[:2] == ["cc-7", "(none)"] and lines[2].split()[-1] == "200.00"
    hourly = list(csv.reader(io.StringIO(cli("costs", "--start", "2026-01-10", "--end", "2026-01-10", "--step",
                                             "hour", "--csv").out)))
    assert [row[0] for row in hourly[1:]] == [f"2026-01-10T{hour:02d}:00:00Z" for hour in range(10)]
    assert {row[-2] for row in hourly[1:]} == {"20.00"}  # 8 devices x 1 h x 2.5 an hour


def test_costs_says_what_borrowing_tidal_capacity_saved(cli, usage, tenant):
    from costs.models import TidalRate

    services.price_save(actor=None, price=TidalRate(factor=Decimal("0.1"), effective_from=datetime(
        2025, 1, 1, tzinfo=UTC)), backdate=True)
    # Half of vision's 8 devices were on capacity a pool lent: 4 x 10 h x 2.5 x 0.1 = 10.00 instead of 100.00.
    UsageSegment.objects.filter(project=tenant.project).update(tidal_devices=4)
    shown = cli("costs", "--month", "2026-01")
    assert shown.code == 0, shown.err
    assert shown.out.splitlines()[-1] == ("On tidal capacity (lent by pools): 40.0 device-hours, 10.00 USD at the "
                                          "tidal rate, 100.00 at the normal rate: borrowing saved 90.00 USD")
    assert "Total: 110.00 USD" in shown.out
    theirs = cli("costs", "--month", "2026-01", user="outsider", token=None)
    assert "tidal capacity" not in theirs.out
