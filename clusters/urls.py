from django.urls import path

from clusters import views

urlpatterns = [
    path("clusters/", views.cluster_list, name="clusters"),
]
