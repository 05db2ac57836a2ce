"""Pages of pools."""

from django.urls import path

from pools import views

urlpatterns = [
    path("pools/", views.pools_page, name="pools"),
    path("pools/<slug:name>/", views.pool_page, name="pool"),
]
