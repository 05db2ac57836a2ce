"""What a job's process gets to log its run: the run, where to send it and a run token of its attempt, for the SDK
(`tidal.init()` with no arguments) and for MLflow's client (`MLFLOW_RUN_ID` makes `mlflow.start_run()` continue the
job's run). The tokens are secret values: on Kubernetes they live in the attempt's Secret the pods read."""

from __future__ import annotations

from django.conf import settings

from jobs.models import Attempt
from jobs.ports import AttemptEnv
from tracking.models import Run
from tracking.tokens import run_token

# Every name run_env sets: a job spec may not set them (jobs.ports.is_reserved_env).
RUN_ENV_NAMES = frozenset({"TIDAL_URL", "TIDAL_RUN_ID", "TIDAL_ATTEMPT", "TIDAL_RUN_TOKEN", "MLFLOW_TRACKING_URI",
                           "MLFLOW_RUN_ID", "MLFLOW_TRACKING_TOKEN"})


def mlflow_uri(project_slug: str) -> str:
    return f"{settings.TIDAL['URL']}/mlflow/{project_slug}"


def run_env(attempt: Attempt) -> AttemptEnv:
    run = Run.objects.filter(job_id=attempt.job_id).select_related("project").only("id", "project__slug").first()
    if run is None:  # a job admitted before tracking existed
        return AttemptEnv({}, {})
    token = run_token(run.pk, attempt.number)
    plain = {"TIDAL_URL": settings.TIDAL["URL"], "TIDAL_RUN_ID": str(run.pk), "TIDAL_ATTEMPT": str(attempt.number),
             "MLFLOW_TRACKING_URI": mlflow_uri(run.project.slug), "MLFLOW_RUN_ID": str(run.pk)}
    return AttemptEnv(plain, {"TIDAL_RUN_TOKEN": token, "MLFLOW_TRACKING_TOKEN": token})
