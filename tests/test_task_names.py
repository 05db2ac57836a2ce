"""Celery task names are what beat's schedule and the messages already queued (deliveries, their retries) refer to:
moving a module must not rename its tasks. Issue 27 moved the webhook delivery into the notifications app and
costs' budget alerts into `costs/budgets/`; their tasks keep their old names, given explicitly."""

from __future__ import annotations

from mlplatform.celery import app

# The task names in use when issue 27 moved modules; a new task adds to them, a name never changes.
NAMES = {
    "clusters.tasks.dispatch_attempt_task", "clusters.tasks.kube_resync_task", "clusters.tasks.kube_sweep_orphans_task",
    "clusters.tasks.kube_sync_nodes_task", "clusters.tasks.observe_simulated_task", "clusters.tasks.stop_attempt_task",
    "clusters.tasks.resize_attempt_task",
    "costs.notifications.mail_budget_task", "costs.notifications.notify_budget_task", "costs.tasks.check_budgets",
    "costs.tasks.roll_segments", "replays.tasks.replay_task", "tracking.notifications.deliver_webhook_task",
    "tracking.notifications.mail_alert_task", "tracking.notifications.notify_alert_task",
    "tracking.tasks.check_hung_runs", "tracking.tasks.prune_raw_points", "tracking.tasks.sweep_artifact_uploads",
    "reliability.tasks.check_hangs", "telemetry.tasks.read_telemetry",
    # issue 31
    "costs.tasks.check_spend_anomalies", "costs.budgets.anomalies.notify_anomaly_task",
    "costs.budgets.scoped.notify_scoped_budget_task",
}


def registered() -> set[str]:
    app.loader.import_default_modules()  # what a worker imports at start
    return {name for name in app.tasks if not name.startswith("celery.")}


def test_a_worker_registers_every_task_by_the_name_it_always_had():
    """As a worker registers them at start: Django's apps ready (importing the modules alerts use), then each
    installed app's `tasks` module discovered."""
    assert registered() >= NAMES


def test_every_task_beat_schedules_is_registered(settings):
    assert {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()} <= registered()


def test_the_moved_tasks_keep_their_old_names():
    from costs.budgets.alerts import mail_budget_task, notify_budget_task
    from notifications.tasks import deliver_webhook_task

    assert deliver_webhook_task.name == "tracking.notifications.deliver_webhook_task"
    assert (notify_budget_task.name, mail_budget_task.name) == ("costs.notifications.notify_budget_task",
                                                                "costs.notifications.mail_budget_task")
