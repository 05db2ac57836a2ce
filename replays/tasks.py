"""Celery task: a thin wrapper that runs a replay by id (in-process and eager in embedded mode)."""

from __future__ import annotations

from celery import shared_task

from core.collector import collector_paused
from replays import runs


@shared_task(bind=True, acks_late=True)
def replay_task(self, run_id: int) -> None:
    # A worker process may pause the collector for the replay; an eager run shares the web process: it may not.
    with collector_paused(enabled=not self.request.is_eager):
        runs.replay_execute(run_id)
