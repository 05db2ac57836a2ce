"""Celery task: a thin wrapper that runs a replay by id (in-process and eager in embedded mode)."""

from __future__ import annotations

from celery import shared_task

from replays import services


@shared_task(acks_late=True)
def replay_task(run_id: int) -> None:
    services.replay_execute(run_id)
