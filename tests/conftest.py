"""Shared fixtures: one organization with a project and a user of every role, plus an outsider in another tenant."""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.contrib.staticfiles.handlers import StaticFilesHandler
from pytest_django.live_server_helper import LiveServer
from rest_framework.test import APIClient

from tenancy.models import Membership, Organization, Project, Role
from tenancy.services import token_create


@dataclass
class Tenant:
    organization: Organization
    project: Project
    other_project: Project  # a second project of another organization, where `outsider` is owner
    users: dict[str, object]  # role name -> user; "outsider" belongs only to other_project


def make_user(username: str, **extra):
    return get_user_model().objects.create_user(username=username, password="pw-" + username + "-123",
                                                email=f"{username}@example.com", **extra)


def ensure_default_priority_classes() -> None:
    """The data migration creates them, but a transactional test's flush removes them for the tests after it."""
    from django.apps import apps

    migration = importlib.import_module("quotas.migrations.0002_default_priority_classes")
    migration.create(apps, None)


class OneRequestAtATime(StaticFilesHandler):
    """The live server's handler on in-memory SQLite, where its request threads share the tests' one connection:
    two requests at once would interleave their transactions on it (one's savepoint inside the other's
    transaction, neither seeing the other's rows to be inserted), which production never does (SQLite's file
    takes one writer at a time, PostgreSQL gives each thread its own connection). A streamed body is read after
    the lock is let go, so a long stream holds up no other request."""

    lock = threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            return super().__call__(environ, start_response)


@pytest.fixture(scope="session")
def live_server(request, django_db_setup):
    """pytest-django's live server, started after the test database is set up (started before it, by a test that
    asks for the server ahead of the database, it would not share the in-memory database's connection: its
    threads' own connections to it fail with "database table is locked" when two write at once), and taking one
    request at a time where it shares the tests' connection."""
    server = LiveServer(request.config.getvalue("liveserver") or os.getenv("DJANGO_LIVE_TEST_SERVER_ADDRESS")
                        or "localhost", start=False)
    if server.thread.connections_override:
        server.thread.static_handler = OneRequestAtATime
    server.start()
    yield server
    server.stop()


@pytest.fixture
def tenant(db) -> Tenant:
    ensure_default_priority_classes()
    org = Organization.objects.create(name="Acme", slug="acme")
    project = Project.objects.create(organization=org, name="Vision", slug="vision")
    other_org = Organization.objects.create(name="Globex", slug="globex")
    other = Project.objects.create(organization=other_org, name="Secret", slug="secret")
    users = {}
    for role in (Role.OWNER, Role.ADMIN, Role.MEMBER, Role.VIEWER):
        users[str(role)] = make_user(str(role))
        Membership.objects.create(project=project, user=users[str(role)], role=role)
    users["outsider"] = make_user("outsider")
    Membership.objects.create(project=other, user=users["outsider"], role=Role.OWNER)
    return Tenant(organization=org, project=project, other_project=other, users=users)


def client_for(user) -> APIClient:
    """An API client authenticated the way the CLI is: a Bearer token."""
    _, secret = token_create(user=user, name="test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def clients(tenant) -> dict[str, APIClient]:
    return {name: client_for(user) for name, user in tenant.users.items()}


@pytest.fixture
def staff_client(db) -> APIClient:
    return client_for(make_user("platform-admin", is_staff=True, is_superuser=True))


@pytest.fixture(autouse=True)
def _isolated_process_state(settings):
    """Tasks run in-process (CI has Redis but no worker) and caches (throttle counters, the submission
    snapshots) start empty."""
    from django.core.cache import cache

    from core.leases import forget_local
    from core.snapshots import forget_all
    from mlplatform.celery import app

    # Tests create many users: a fast hasher instead of PBKDF2's deliberate slowness (seconds per test on CI).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    cache.clear()
    forget_all()
    forget_local()
    yield
    cache.clear()
