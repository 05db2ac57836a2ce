"""Cost report pages. `costs` keeps the navigation's name for the report."""

from django.urls import path

from costs import views

urlpatterns = [
    path("costs/", views.cost_report, name="costs"),
    path("costs/admin/", views.cost_admin, name="costs-admin"),
]
