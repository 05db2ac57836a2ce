"""Demo tenants for `make run`: idempotent, so running it twice keeps (and does not duplicate) the data."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from tenancy.models import Membership, Organization, Project, Role
from tenancy.services import project_save

DEMO_PASSWORD = "tidal-demo"
DEMO_USERS = [
    # username, role in every demo project (None: platform staff), description
    ("admin", None, "platform admin (staff; admin console at /admin/)"),
    ("alice", Role.OWNER, "owner"),
    ("bob", Role.ADMIN, "admin"),
    ("carol", Role.MEMBER, "member: submits and manages her own jobs"),
    ("dave", Role.VIEWER, "viewer: read only"),
]
DEMO_PROJECTS = [("vision", "Vision"), ("language", "Language models"), ("robotics", "Robotics RL")]


def _project(organization: Organization, slug: str, name: str) -> Project:
    return Project.objects.filter(organization=organization, slug=slug).first() or project_save(
        actor="seed_demo", project=Project(organization=organization, slug=slug, name=name))


def seed_tenants() -> list[tuple[str, str]]:
    """Create the demo organization, projects and users; returns (username, description) for the login banner."""
    User = get_user_model()
    org, _ = Organization.objects.get_or_create(slug="acme", defaults={"name": "Acme Research"})
    projects = [_project(org, slug, name) for slug, name in DEMO_PROJECTS]
    logins = []
    for username, role, description in DEMO_USERS:
        user, created = User.objects.get_or_create(
            username=username, defaults={"email": f"{username}@acme.example", "is_staff": role is None,
                                         "is_superuser": role is None}
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        if role is not None:
            for project in projects:
                Membership.objects.get_or_create(project=project, user=user, defaults={"role": role})
        logins.append((username, description))
    # An outsider in another organization, to see tenant isolation from the other side.
    other, _ = Organization.objects.get_or_create(slug="globex", defaults={"name": "Globex Labs"})
    secret = _project(other, "globex-llm", "LLM")
    erin, created = User.objects.get_or_create(username="erin", defaults={"email": "erin@globex.example"})
    if created:
        erin.set_password(DEMO_PASSWORD)
        erin.save()
    Membership.objects.get_or_create(project=secret, user=erin, defaults={"role": Role.OWNER})
    logins.append(("erin", "owner of globex-llm in another organization"))
    return logins
