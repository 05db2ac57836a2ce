"""The per-process answers to "who is this token" and "what role does this user hold here" (tenancy/authcache.py):
every way of taking access away applies on the next request, on this process or any other."""

import time

import pytest
from django.core.cache import cache

from jobs.models import Job
from tenancy import authcache
from tenancy.models import ApiToken, Membership
from tenancy.services import membership_change_role, membership_remove
from tests.conftest import client_for
from tests.jobs.conftest import api_body


@pytest.fixture(autouse=True)
def _inventory(inventory):
    return inventory


@pytest.fixture
def member(tenant):
    """The member's client, its cache warmed by one accepted submission."""
    client = client_for(tenant.users["member"])
    assert client.post("/api/v1/jobs/", api_body(), format="json").status_code == 201
    return client


def submit(client):
    return client.post("/api/v1/jobs/", api_body(), format="json")


def test_a_warm_submission_asks_the_database_nothing_but_the_writes(member, django_assert_num_queries):
    with django_assert_num_queries(5):  # savepoint, job, groups, event, release
        assert submit(member).status_code == 201


def test_a_removed_member_is_refused_at_once(tenant, member):
    membership = Membership.objects.get(user=tenant.users["member"], project=tenant.project)
    membership_remove(actor=tenant.users["owner"], membership=membership)
    response = submit(member)
    assert response.status_code == 400 and "project" in response.json()["error"]["fields"]


def test_a_member_made_viewer_is_refused_at_once(tenant, member):
    membership = Membership.objects.get(user=tenant.users["member"], project=tenant.project)
    membership_change_role(actor=tenant.users["owner"], membership=membership, role="viewer")
    assert submit(member).status_code == 403


def test_an_archived_project_and_a_deactivated_user_apply_at_once(tenant, member):
    tenant.project.archived = True
    tenant.project.save()
    assert submit(member).status_code == 400
    user = tenant.users["member"]
    user.is_active = False
    user.save()
    assert member.get("/api/v1/me/").status_code == 401


def test_a_change_made_by_another_process_applies_at_once(tenant, member):
    # Another process revokes the token: its signal replaces the shared epoch; this process saw neither the save
    # nor the signal, only the row and the epoch.
    ApiToken.objects.filter(user=tenant.users["member"]).update(revoked_at="2026-01-01T00:00:00Z")
    cache.set(authcache.EPOCH_KEY, "set by another process", timeout=None)
    assert member.get("/api/v1/me/").status_code == 401


def test_a_write_that_skips_signals_is_bounded_by_the_ttl(tenant, member, monkeypatch):
    Membership.objects.filter(user=tenant.users["member"], project=tenant.project).update(role="viewer")
    assert submit(member).status_code == 201  # the cached answer, at most TTL_SECONDS old
    later = time.monotonic() + authcache.TTL_SECONDS + 1
    monkeypatch.setattr(authcache.time, "monotonic", lambda: later)
    assert submit(member).status_code == 403


def test_without_a_shared_cache_nothing_is_reused(tenant, member, monkeypatch, django_assert_num_queries):
    def unreachable(*args, **kwargs):
        raise ConnectionError("cache down")

    monkeypatch.setattr(authcache.cache, "get", unreachable)
    with django_assert_num_queries(7):  # token and membership read again, then the writes
        assert submit(member).status_code == 201
    assert Job.objects.count() == 2


def test_callers_get_their_own_copies(tenant, member):
    from tenancy.selectors import project_for_user

    first = project_for_user(tenant.users["member"], "vision")
    first.archived = True  # a caller's change to its copy
    assert project_for_user(tenant.users["member"], "vision").archived is False


def test_a_cached_token_and_its_user_are_copied(tenant):
    token = ApiToken.objects.select_related("user").get(pk=ApiToken.objects.create(
        user=tenant.users["member"], name="copy", digest="d" * 64).pk)
    epoch = authcache.current_epoch()
    authcache.tokens.put("digest", epoch, token)
    first = authcache.tokens.get("digest", epoch)
    first.name, first.user.first_name = "changed", "changed"  # a caller's changes to its copy
    second = authcache.tokens.get("digest", epoch)
    assert (second.name, second.user.first_name) == ("copy", tenant.users["member"].first_name)
    assert second.user is not first.user and second._state is not first._state
