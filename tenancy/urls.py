from django.urls import include, path

from tenancy import views

urlpatterns = [
    path("", views.home, name="home"),
    path("switch/", views.switch_project, name="switch_project"),
    path("projects/<slug:slug>/", views.project_detail, name="project_detail"),
    path("projects/<slug:slug>/settings/", views.project_settings, name="project_settings"),
    path("projects/<slug:slug>/members/add/", views.member_add, name="member_add"),
    path("projects/<slug:slug>/members/<int:membership_id>/", views.member_update, name="member_update"),
    path("projects/<slug:slug>/tokens/", views.token_create, name="token_create"),
    path("projects/<slug:slug>/tokens/<int:token_id>/revoke/", views.token_revoke, name="token_revoke"),
    path("projects/<slug:slug>/audit/", views.project_audit, name="project_audit"),
    path("", include("jobs.urls")),
    path("", include("clusters.urls")),
]
