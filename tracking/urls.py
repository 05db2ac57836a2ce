"""Pages of experiment tracking. `experiments` keeps the navigation's name for the list."""

from django.urls import path

from tracking import views
from tracking.artifacts import views as artifact_views

urlpatterns = [
    path("experiments/", views.experiment_list, name="experiments"),
    path("experiments/<int:pk>/", views.experiment_detail, name="experiment_detail"),
    path("runs/compare/", views.run_compare, name="run_compare"),
    path("runs/<int:pk>/", views.run_detail, name="run_detail"),
    path("runs/<int:pk>/live/", views.run_live, name="run_live"),
    path("runs/<int:pk>/alerts/", views.run_alert_action, name="run_alert_action"),
    path("runs/<int:pk>/manage/", views.run_manage, name="run_manage"),
    path("runs/<int:pk>/artifacts/download/<path:path>", artifact_views.artifact_download,
         name="run_artifact_download"),
    path("runs/<int:pk>/artifacts/preview/<path:path>", artifact_views.artifact_preview, name="run_artifact_preview"),
    path("mlflow/<slug:project>/", views.mlflow_links, name="mlflow_links"),
    path("projects/<slug:slug>/alert-rules/", views.alert_settings, name="alert_settings"),
]
