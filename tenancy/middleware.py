"""Remembers the project a signed-in user is looking at (the project switcher), per session; opens each request's
memo of the caller's roles (tenancy.permissions)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject

from tenancy import permissions, selectors
from tenancy.models import Project

SESSION_KEY = "tidal_project"


def current_project(request: HttpRequest) -> Project | None:
    user = request.user
    if not user.is_authenticated:
        return None
    slug = request.session.get(SESSION_KEY)
    project = selectors.projects_for_user(user).filter(slug=slug).first() if slug else None
    return project or selectors.default_project_for_user(user)


class CurrentProjectMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.project = SimpleLazyObject(lambda: current_project(request))
        return self.get_response(request)


class RoleMemoMiddleware:
    """Roles found during a request are remembered until it ends, and by no other request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with permissions.roles_remembered():
            return self.get_response(request)
