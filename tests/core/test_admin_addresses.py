"""The admin console reads values from its addresses (an add page's initial fields, a list's filters): one a field
cannot hold is no server error (a crawl of every console page with odd values in its query string found these)."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import Client

from core.admin import ModelAdmin
from tests.conftest import make_user

TOO_LARGE = "99999999999999999999999"  # beyond a 64-bit integer


@pytest.fixture
def console(db) -> Client:
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(make_user("console-admin", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize("page", ["/admin/tenancy/membership/add/", "/admin/costs/budget/add/"])
@pytest.mark.parametrize("value", ["abc", "²", "1.5", TOO_LARGE])
def test_an_add_page_leaves_out_an_initial_relation_that_is_no_id(console, tenant, page, value):
    """`?project=abc` failed the page's project select with a ValueError (a 500, on PostgreSQL too)."""
    response = console.get(page, {"project": value})
    assert response.status_code == 200
    assert response.context["adminform"].form.initial.get("project") is None


def test_an_add_page_still_takes_an_initial_relation_that_is_an_id(console, tenant):
    response = console.get("/admin/costs/budget/add/", {"project": str(tenant.project.pk)})
    assert response.status_code == 200
    assert response.context["adminform"].form.initial["project"] == str(tenant.project.pk)
    assert f'<option value="{tenant.project.pk}" selected>' in response.content.decode()


@pytest.mark.parametrize("page", ["/admin/jobs/job/", "/admin/clusters/node/", "/admin/quotas/quota/"])
def test_a_list_filtered_by_an_id_beyond_the_databases_integers_is_no_server_error(console, tenant, page):
    """On SQLite (`make run`), which binds integers up to 2^63 - 1, it failed with an OverflowError; PostgreSQL finds
    nothing. Either way the list answers: empty, or unfiltered with Django's note on a filter it cannot apply."""
    response = console.get(page, {"project" if "cluster" not in page else "cluster": TOO_LARGE})
    assert response.status_code == 200 or (response.status_code == 302 and response["Location"].endswith("?e=1"))


def test_every_console_page_has_the_shared_base():
    """The project's models' pages, and Django's own for accounts and groups."""
    registered = [model for model in apps.get_models() if admin.site.is_registered(model)]
    assert len(registered) > 20 and User in registered
    for model in registered:
        assert isinstance(admin.site.get_model_admin(model), ModelAdmin), model


def test_no_console_page_fails_on_a_relation_in_its_address_that_no_id_can_be(console, tenant):
    """Every list and add page of the project's models, each relation of its model given a value that is no id."""
    from django.db.models import ForeignKey, ManyToManyField
    from django.urls import NoReverseMatch, reverse

    asked = 0
    for model in apps.get_models():
        if not admin.site.is_registered(model) or model.__module__.startswith("django."):
            continue
        relations = [f.name for f in model._meta.get_fields() if isinstance(f, ForeignKey | ManyToManyField)]
        for view in ("changelist", "add"):
            try:
                page = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}")
            except NoReverseMatch:
                continue
            for name in relations:
                for value in ("abc", "²", TOO_LARGE):
                    assert console.get(page, {name: value}).status_code < 500, (page, name, value)
                    asked += 1
    assert asked > 100


@pytest.mark.parametrize("page", ["/admin/costs/budget/add/", "/admin/tenancy/membership/add/"])
@pytest.mark.parametrize("value", ["abc", "²", TOO_LARGE])
def test_a_form_sent_back_with_a_relation_that_is_no_id_shows_the_error(console, tenant, page, value):
    """The form refused it, and rendering the form again looked it up in the autocomplete select: a 500."""
    response = console.post(page, {"project": value, "user": value, "amount": "100", "role": "member"})
    assert response.status_code == 200
    assert "project" in response.context["adminform"].form.errors


def test_past_use_is_the_schedulers_to_keep(console, tenant):
    """Its add page saved a row without its time (IntegrityError)."""
    assert console.get("/admin/quotas/projectusage/add/").status_code == 403
    assert console.post("/admin/quotas/projectusage/add/", {"decayed_device_seconds": "1"}).status_code == 403


@pytest.mark.parametrize("page, field, fields", [
    ("/admin/auth/group/add/", "permissions", {"name": "ops"}),
    ("/admin/auth/user/{user}/change/", "groups", {"username": "console-admin", "date_joined_0": "2026-01-01",
                                                   "date_joined_1": "00:00:00"}),
])
@pytest.mark.parametrize("value", ["abc", "²", TOO_LARGE])
def test_a_many_to_many_choice_that_is_no_id_is_the_forms_error(console, page, field, fields, value):
    """A form's many-to-many field given a value no id can be: the form says so. On SQLite (`make run`), an id beyond
    64-bit integers reached the query that looks the choices up (OverflowError: a 500, Django's Group page found by a
    crawl posting odd values into every console form)."""
    user = User.objects.get(username="console-admin")
    response = console.post(page.format(user=user.pk), {**fields, field: value})
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
