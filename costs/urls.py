"""Cost report pages. `costs` keeps the navigation's name for the report."""

from django.urls import path

from costs import budget_views, views

urlpatterns = [
    path("costs/", views.cost_report, name="costs"),
    path("costs/admin/", views.cost_admin, name="costs-admin"),
    path("projects/<slug:slug>/budget/", budget_views.budget_edit, name="budget_edit"),
]
