"""Pages of reliability."""

from django.urls import path

from reliability import views

urlpatterns = [
    path("reliability/", views.report, name="reliability"),
    path("reliability/quarantine/", views.quarantine, name="reliability-quarantine"),
    path("reliability/quarantine/<int:pk>/release/", views.release, name="reliability-release"),
]
