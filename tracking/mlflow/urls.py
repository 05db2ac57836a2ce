"""MLflow's tracking endpoints under `mlflow/<project>/api/2.0/mlflow/`, the paths its REST client calls."""

from django.urls import path, re_path

from tracking.mlflow import views
from tracking.mlflow.views import endpoint

urlpatterns = [
    path("experiments/get-by-name", endpoint(views.experiments_get_by_name, "GET")),
    path("experiments/get", endpoint(views.experiments_get, "GET")),
    path("experiments/create", endpoint(views.experiments_create, "POST")),
    path("runs/create", endpoint(views.runs_create, "POST")),
    path("runs/get", endpoint(views.runs_get, "GET")),
    path("runs/update", endpoint(views.runs_update, "POST")),
    path("runs/search", endpoint(views.runs_search, "POST")),
    path("runs/log-batch", endpoint(views.runs_log_batch, "POST")),
    path("runs/log-metric", endpoint(views.runs_log_metric, "POST")),
    path("runs/log-parameter", endpoint(views.runs_log_parameter, "POST")),
    path("runs/set-tag", endpoint(views.runs_set_tag, "POST")),
    path("metrics/get-history", endpoint(views.metrics_get_history, "GET")),
    re_path(r"^(?P<rest>.*)$", views.unknown_endpoint),
]
