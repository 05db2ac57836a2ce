"""MLflow's tracking endpoints under `mlflow/<project>/`: the paths its REST client calls (`api/2.0/mlflow/...`,
MLflow 3's logged models among them: tracking.mlflow.logged_models) and the same under `ajax-api/`, which its UI
calls; its artifact proxy (`api/2.0/mlflow-artifacts/...`, tracking.mlflow.artifacts) and
`api/3.0/mlflow/server-info`; any other path there is MLflow's ENDPOINT_NOT_FOUND."""

from django.urls import include, path, re_path

from tracking.mlflow import artifacts, logged_models, views
from tracking.mlflow.views import endpoint, endpoint_by_method

endpoints = [
    path("experiments/get-by-name", endpoint(views.experiments_get_by_name, "GET")),
    path("experiments/get", endpoint(views.experiments_get, "GET")),
    path("experiments/create", endpoint(views.experiments_create, "POST")),
    path("runs/create", endpoint(views.runs_create, "POST")),
    path("runs/get", endpoint(views.runs_get, "GET")),
    path("runs/update", endpoint(views.runs_update, "POST")),
    path("runs/search", endpoint(views.runs_search, "POST")),
    path("runs/log-batch", endpoint(views.runs_log_batch, "POST", logs=True)),
    path("runs/log-metric", endpoint(views.runs_log_metric, "POST", logs=True)),
    path("runs/log-parameter", endpoint(views.runs_log_parameter, "POST", logs=True)),
    path("runs/set-tag", endpoint(views.runs_set_tag, "POST", logs=True)),
    path("runs/delete-tag", endpoint(views.runs_delete_tag, "POST")),
    path("runs/delete", endpoint(views.runs_delete, "POST")),
    path("runs/restore", endpoint(views.runs_restore, "POST")),
    path("runs/outputs", endpoint(logged_models.runs_outputs, "POST")),
    path("logged-models", endpoint(logged_models.create, "POST")),
    path("logged-models/search", endpoint(logged_models.search, "POST")),
    path("logged-models/<str:model_id>",
         endpoint_by_method({"GET": logged_models.get, "PATCH": logged_models.finalize})),
    path("logged-models/<str:model_id>/params", endpoint(logged_models.log_params, "POST")),
    path("logged-models/<str:model_id>/tags", endpoint(logged_models.set_tags, "PATCH")),
    path("logged-models/<str:model_id>/tags/<path:tag_key>", endpoint(logged_models.delete_tag, "DELETE")),
    path("logged-models/<str:model_id>/artifacts/directories", endpoint(logged_models.list_artifacts, "GET")),
    path("metrics/get-history", endpoint(views.metrics_get_history, "GET")),
    path("metrics/get-history-bulk-interval", endpoint(views.metrics_get_history_bulk_interval, "GET")),
]

artifact_endpoints = [
    path("artifacts", artifacts.ArtifactListEndpoint.as_view()),
    # Any character, a newline too, reaches the view, whose path check names the field (Django's `path` stops at one).
    re_path(r"^artifacts/(?P<artifact_path>(?s:.+))$", artifacts.ArtifactEndpoint.as_view()),
    path("mpu/create/<path:artifact_path>", artifacts.MultipartEndpoint.as_view(step="create")),
    path("mpu/complete/<path:artifact_path>", artifacts.MultipartEndpoint.as_view(step="complete")),
    path("mpu/abort/<path:artifact_path>", artifacts.MultipartEndpoint.as_view(step="abort")),
    path("mpu/part/<slug:upload>/<int:number>", artifacts.upload_part, name="mlflow-artifact-part"),
]

urlpatterns = [
    path("api/2.0/mlflow/", include(endpoints)),
    path("api/2.0/mlflow-artifacts/", include(artifact_endpoints)),
    path("api/3.0/mlflow/server-info", artifacts.server_info),
    path("ajax-api/2.0/mlflow/", include(endpoints)),
    re_path(r"^(?:ajax-)?api/(?P<rest>.*)$", views.unknown_endpoint),
]
