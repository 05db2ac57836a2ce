"""project_for_user: one query finds the project through the caller's membership and remembers, for the request,
only that caller's role; nobody else's role check can use it."""

from django.contrib.auth.models import AnonymousUser

from tenancy.models import Membership
from tenancy.permissions import role_in_project, roles_remembered
from tenancy.selectors import project_for_user
from tests.conftest import make_user


def test_the_remembered_role_is_the_callers_own(tenant, django_assert_num_queries):
    member, viewer = tenant.users["member"], tenant.users["viewer"]
    with roles_remembered():  # one request's scope, as tenancy.middleware.RoleMemoMiddleware opens
        with django_assert_num_queries(1):  # a cold cache
            project = project_for_user(member, "vision")
            assert role_in_project(member, project) == "member"
        with django_assert_num_queries(1):  # another user's role is read, not taken from the first caller
            assert role_in_project(viewer, project) == "viewer"
        assert role_in_project(tenant.users["outsider"], project) is None


def test_projects_the_caller_cannot_see_are_none(tenant):
    assert project_for_user(tenant.users["member"], "secret") is None
    assert project_for_user(tenant.users["member"], "no-such-project") is None
    assert project_for_user(AnonymousUser(), "vision") is None


def test_staff_find_every_project_as_owners(tenant):
    staff = make_user("ops", is_staff=True)
    project = project_for_user(staff, "secret")
    assert project == tenant.other_project and role_in_project(staff, project) == "owner"


def test_a_role_changed_later_is_seen_by_the_next_lookup(tenant):
    member = tenant.users["member"]
    assert role_in_project(member, project_for_user(member, "vision")) == "member"
    membership = Membership.objects.get(user=member, project=tenant.project)
    membership.role = "viewer"
    membership.save()  # forgets the cached answer (tenancy/authcache.py)
    assert role_in_project(member, project_for_user(member, "vision")) == "viewer"
