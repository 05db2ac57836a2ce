"""The analyses' API (under /api/v1/costs/) and pages (under /costs/)."""

from django.urls import path

from costs.analysis import api as analysis_api
from costs.analysis import views as analysis_views

urlpatterns = [
    path("api/v1/costs/efficiency/", analysis_api.EfficiencyView.as_view(), name="cost-efficiency"),
    path("api/v1/costs/efficiency/csv/", analysis_api.EfficiencyCsvView.as_view(), name="cost-efficiency-csv"),
    path("api/v1/costs/waste/", analysis_api.WasteView.as_view(), name="cost-waste"),
    path("api/v1/costs/waste/csv/", analysis_api.WasteCsvView.as_view(), name="cost-waste-csv"),
    path("api/v1/costs/queueing/", analysis_api.QueueingView.as_view(), name="cost-queueing"),
    path("api/v1/costs/queueing/csv/", analysis_api.QueueingCsvView.as_view(), name="cost-queueing-csv"),
    path("costs/efficiency/", analysis_views.efficiency, name="costs-efficiency"),
    path("costs/waste/", analysis_views.waste, name="costs-waste"),
    path("costs/queueing/", analysis_views.queueing, name="costs-queueing"),
]
