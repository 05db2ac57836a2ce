"""Cost report pages. `costs` keeps the navigation's name for the report."""

from django.urls import path

from costs.budgets import views as budget_views
from costs.reports import views

urlpatterns = [
    path("costs/", views.cost_report, name="costs"),
    path("costs/admin/", views.cost_admin, name="costs-admin"),
    path("projects/<slug:slug>/budget/", budget_views.budget_edit, name="budget_edit"),
]
