"""`tidal runs`, `tidal run` and `tidal metrics` against a live server, on runs logged through the ingestion
service."""

from __future__ import annotations

import csv
import io

import pytest
from django.utils import timezone

from tracking import services
from tracking.models import Alert

pytestmark = pytest.mark.django_db(transaction=True)


def make_run(tenant, experiment: str, name: str, params: dict, losses: list[float], status: str | None = None):
    project = tenant.project
    run = services.run_create(project=project, name=name, user=tenant.users["member"], params=params,
                              experiment=services.experiment_get_or_create(project=project, name=experiment))
    services.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "value": v, "step": i}
                                                  for i, v in enumerate(losses)])
    if status:
        services.run_update(run=run, status=status)
    return run


@pytest.fixture
def runs(tenant):
    return {
        "a": make_run(tenant, "sweep", "lr-0.1", {"lr": "0.1"}, [2.0, 0.5]),
        "b": make_run(tenant, "sweep", "lr-0.01", {"lr": "0.01"}, [2.0, 0.2], status="FINISHED"),
        "c": make_run(tenant, "baseline", "plain", {"lr": "0.1"}, [3.0]),
    }


def test_runs_lists_filters_and_sorts(cli, runs):
    listed = cli("runs")
    assert listed.code == 0, listed.err
    assert {"lr-0.1", "lr-0.01", "plain", "sweep", "baseline"} <= set(listed.out.split())
    by_loss = cli("runs", "--experiment", "sweep", "--sort", "metric.loss", "--json")
    assert [r["id"] for r in by_loss.json()] == [runs["b"].pk, runs["a"].pk]
    table = cli("runs", "--experiment", "sweep", "--sort", "-metric.loss").out.splitlines()
    assert table[0].split()[-1] == "LOSS" and table[1].split()[-1] == "0.5" and table[2].split()[-1] == "0.2"
    by_id = cli("runs", "--experiment", str(runs["c"].experiment_id), "--project", "vision", "--json").json()
    assert [r["name"] for r in by_id] == ["plain"]
    finished = cli("runs", "--status", "finished", "--json").json()
    assert [r["id"] for r in finished] == [runs["b"].pk]
    assert [r["name"] for r in cli("runs", "--param", "lr:0.01", "--json").json()] == ["lr-0.01"]
    assert cli("runs", user="outsider").out.strip() == "No runs."  # another tenant's runs stay invisible


def test_runs_errors_are_one_line_and_non_zero(cli, runs):
    missing = cli("runs", "--experiment", "nope")
    assert missing.code == 1 and missing.err.strip() == "tidal: No experiment named 'nope' in your projects."
    hidden = cli("runs", "--experiment", "sweep", user="outsider")
    assert hidden.code == 1 and "No experiment named 'sweep'" in hidden.err
    bad_sort = cli("runs", "--sort", "loss")
    assert bad_sort.code == 1 and bad_sort.err.startswith("tidal: ") and "metric.<key>" in bad_sort.err
    assert cli("runs", "--status", "sleeping").code == 2
    assert cli("runs", "--project", "secret").code == 1  # not one of the member's projects


def test_run_shows_params_last_metrics_and_open_alerts(cli, runs):
    run = runs["a"]
    now = timezone.now()
    Alert.objects.create(run=run, rule="loss_spike", key="loss", step=1, value=9.0, message="loss jumped 4x",
                         opened_at=now)
    Alert.objects.create(run=run, rule="non_finite", key="loss", step=0, message="loss is NaN", opened_at=now,
                         resolved_at=now)
    shown = cli("run", str(run.pk))
    assert shown.code == 0, shown.err
    out = shown.out
    assert out.startswith(f"Run {run.pk}: lr-0.1  [RUNNING]")
    params = out.split("Params", 1)[1].split("Metrics", 1)[0]
    assert "lr: 0.1" in params
    metrics = out.split("Metrics (last value)", 1)[1].split("Open alerts", 1)[0].split()
    assert metrics[:5] == ["KEY", "LAST", "STEP", "MIN", "MAX"] and metrics[5:10] == ["loss", "0.5", "1", "0.5", "2"]
    alerts = out.split("Open alerts", 1)[1]
    assert "loss_spike" in alerts and "loss jumped 4x" in alerts and "non_finite" not in alerts
    as_json = cli("run", str(run.pk), "--json").json()
    assert as_json["params"] == {"lr": "0.1"} and [a["rule"] for a in as_json["open_alerts"]] == ["loss_spike"]
    for argv, user in ((("run", "99999"), "member"), (("run", str(run.pk)), "outsider")):
        gone = cli(*argv, user=user)
        assert gone.code == 1 and gone.err.strip() == (f"tidal: Run {argv[1]} not found: it does not exist or is "
                                                       "not in one of your projects.")


def test_run_shows_a_nan_last_value_as_nan_marked(cli, tenant):
    run = make_run(tenant, "sweep", "diverged", {}, [2.0, 1.0])
    services.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "value": "NaN", "step": 2}])
    out = cli("run", str(run.pk)).out
    metrics = out.split("Metrics (last value)", 1)[1].split("Open alerts", 1)[0]
    assert metrics.split()[5:10] == ["loss", "NaN*", "2", "1", "2"]
    assert "* not a finite number" in metrics
    assert cli("run", str(run.pk), "--json").json()["summary"]["loss"]["last"] == "NaN"


def test_metrics_prints_a_table_or_every_point_as_csv(cli, tenant):
    run = make_run(tenant, "sweep", "long", {}, [1.0 / (i + 1) for i in range(3000)])
    services.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "value": "NaN", "step": 3000}])
    table = cli("metrics", str(run.pk), "loss", "--max-points", "20")
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].startswith("# loss: ") and "of 3001 points" in lines[0]
    assert lines[1].split() == ["STEP", "LOSS"] and lines[2].split() == ["0", "1"]
    assert lines[-1].split() == ["3000", "NaN"]
    full = cli("metrics", str(run.pk), "loss", "--csv")
    assert full.code == 0, full.err
    rows = list(csv.reader(io.StringIO(full.out)))
    assert rows[0] == ["key", "step", "value"] and len(rows) == 3002 and rows[-1] == ["loss", "3000", "NaN"]
    short = cli("metrics", str(run.pk), "loss").out.splitlines()  # the server's default, 1000 points
    assert short[0].startswith("# loss: ") and len(short) > 100
    series = cli("metrics", str(run.pk), "loss", "--max-points", "20", "--json").json()
    assert series["total"] == 3001 and series["markers"] == [[3000, "NaN"]]


def test_metrics_errors(cli, runs):
    run = runs["a"].pk
    unknown = cli("metrics", str(run), "accuracy")
    assert unknown.code == 1 and unknown.err.strip() == f"tidal: Run {run} has no metric 'accuracy' (its metrics: loss)"
    assert cli("metrics", "99999", "loss").err.startswith("tidal: Run 99999 not found")
    assert cli("metrics", str(run), "loss", "--csv", user="outsider").err.startswith(f"tidal: Run {run} not found")
    assert cli("metrics", str(run), "loss", "--csv", "--json").code == 2
    assert cli("metrics", str(run), "loss", "--max-points", "1").code == 1  # the server's range: 2-100000


def test_alerts_are_listed_acknowledged_resolved_and_muted(cli, runs):
    run = runs["a"]
    services.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "value": "NaN", "step": 5}])
    alert = Alert.objects.get(run=run)
    listed = cli("alerts").out
    assert "non_finite" in listed and str(run.pk) in listed and "open" in listed
    assert cli("alerts", "--run", str(runs["b"].pk)).out.strip() == "No open alerts."
    assert cli("alerts", "ack", str(alert.pk), user="viewer").code == 1  # a viewer may not
    acked = cli("alerts", "ack", str(alert.pk))
    assert acked.code == 0 and acked.out.strip().endswith("acknowledged by member.")
    resolved = cli("alerts", "resolve", str(alert.pk))
    assert resolved.code == 0 and resolved.out.strip().endswith("resolved by member.")
    assert cli("alerts").out.strip() == "No open alerts."
    assert "resolved by member" in cli("alerts", "--all").out
    missing = cli("alerts", "resolve", "99999")
    assert missing.code == 1 and "Alert 99999 not found" in missing.err
    muted = cli("alerts", "mute", str(run.pk), "--rule", "loss_spike")
    assert muted.code == 0 and muted.out.strip() == f"Run {run.pk} (lr-0.1): muted loss_spike."
    assert cli("alerts", "mute", str(run.pk), "--rule", "melting").code == 1
    assert cli("alerts", "mute", str(run.pk), "--json").json()["muted_rules"] == ["*", "loss_spike"]
    assert cli("alerts", "unmute", str(run.pk)).out.strip() == f"Run {run.pk} (lr-0.1): muted nothing."


def test_a_run_whose_job_waits_again_says_so():
    """Defect: `tidal run` and `tidal runs` said RUNNING while the run's job was queued again after a preemption."""
    from tidal_cli.commands.tracking import status_text

    assert status_text({"status": "RUNNING", "state": "Running"}) == "RUNNING"
    assert status_text({"status": "RUNNING", "state": "Queued (preempted)"}) == "RUNNING, job queued (preempted)"
    assert status_text({"status": "KILLED", "state": "Killed"}) == "KILLED"


def test_runs_are_renamed_tagged_noted_deleted_and_restored(cli, runs):
    run = runs["a"]
    assert cli("runs", "rename", str(run.pk), "lr-0.1-final").code == 0
    tagged = cli("runs", "tag", str(run.pk), "team=nlp", "stage=final")
    assert tagged.code == 0, tagged.err
    assert tagged.out.strip() == f"Run {run.pk}'s tags: stage=final, team=nlp."
    assert cli("runs", "tag", str(run.pk), "--remove", "stage").out.strip() == f"Run {run.pk}'s tags: team=nlp."
    assert cli("runs", "note", str(run.pk), "# best so far").code == 0
    assert [r["name"] for r in cli("runs", "--tag", "team:nlp", "--json").json()] == ["lr-0.1-final"]
    assert [r["name"] for r in cli("runs", "--name", "FINAL", "--json").json()] == ["lr-0.1-final"]
    assert cli("runs", "delete", str(run.pk)).code == 0
    assert "lr-0.1-final" not in cli("runs").out
    assert [r["name"] for r in cli("runs", "--lifecycle", "deleted", "--json").json()] == ["lr-0.1-final"]
    restored = cli("runs", "restore", str(run.pk))
    assert restored.code == 0 and restored.out.strip() == f"Run {run.pk} (lr-0.1-final) is restored."
    run.refresh_from_db()
    assert (run.note, run.tags, run.deleted_at) == ("# best so far", {"team": "nlp"}, None)


def test_run_management_errors_name_the_field_and_exit_non_zero(cli, runs):
    run = runs["a"]
    bad = cli("runs", "rename", str(run.pk), "bad\nname")
    assert bad.code == 1 and "name" in bad.err
    assert cli("runs", "tag", str(run.pk), "notatag").code == 2
    hidden = cli("runs", "delete", str(run.pk), user="outsider")
    assert hidden.code == 1 and f"Run {run.pk} not found" in hidden.err
    assert cli("runs", "delete", str(run.pk), user="viewer").code == 1
    run.refresh_from_db()
    assert run.name == "lr-0.1" and run.deleted_at is None
