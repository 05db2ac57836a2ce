from django.http import HttpRequest

from tenancy import selectors

NAVIGATION = [
    ("jobs", "Jobs"),
    ("queue", "Queue"),
    ("experiments", "Experiments"),
    ("costs", "Costs"),
    ("reliability", "Reliability"),
    ("clusters", "Clusters"),
    ("pools", "Pools"),
    ("services", "Services"),
]


def navigation(request: HttpRequest) -> dict:
    """The project switcher's choices and the main navigation for every page."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    project = getattr(request, "project", None)
    return {
        "nav_projects": selectors.projects_for_user(user).filter(archived=False),
        "current_project": project if project else None,
        "nav_items": NAVIGATION,
    }
