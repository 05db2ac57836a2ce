"""Pages of services."""

from django.urls import path

from serving import views

urlpatterns = [
    path("services/", views.services_page, name="services"),
    path("services/<int:pk>/", views.service_page, name="service"),
]
