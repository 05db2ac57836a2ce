from django.urls import path

from jobs import views

urlpatterns = [
    path("jobs/", views.job_list, name="jobs"),
    path("jobs/new/", views.job_new, name="job_new"),
    path("jobs/new/template/", views.job_template, name="job_template"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/live/", views.job_live, name="job_live"),
    path("jobs/<int:pk>/logs/", views.job_logs, name="job_logs"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job_cancel"),
    path("jobs/<int:pk>/scale/", views.job_scale, name="job_scale"),
    path("jobs/<int:pk>/resubmit/", views.job_resubmit, name="job_resubmit"),
    path("queue/", views.queue, name="queue"),
]
