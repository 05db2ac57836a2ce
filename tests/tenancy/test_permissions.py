"""tenancy.permissions: the ranks, who manages a job, and the request's memo of roles (it lives as long as one
request, on no model instance, and a membership changed during the request is read again)."""

import pytest
from django.http import HttpResponse

from tenancy.middleware import RoleMemoMiddleware
from tenancy.models import Membership, Role
from tenancy.permissions import (
    can_manage_job,
    is_submitter_or_admin,
    role_at_least,
    role_in_project,
    roles_at_least,
    roles_remembered,
)
from tenancy.selectors import project_for_user
from tests.conftest import make_user


@pytest.mark.parametrize(("role", "minimum", "allowed"), [
    (Role.OWNER, Role.ADMIN, True), (Role.ADMIN, Role.ADMIN, True), (Role.MEMBER, Role.ADMIN, False),
    (Role.VIEWER, Role.MEMBER, False), (Role.VIEWER, Role.VIEWER, True), (None, Role.VIEWER, False),
])
def test_a_higher_role_allows_what_a_lower_one_does(role, minimum, allowed):
    assert role_at_least(role, minimum) is allowed


def test_roles_at_least_lists_the_roles_a_query_accepts():
    assert sorted(roles_at_least(Role.ADMIN)) == ["admin", "owner"]
    assert len(roles_at_least(Role.VIEWER)) == 4


@pytest.mark.parametrize(("role", "own", "manages"), [
    (Role.OWNER, False, True), (Role.ADMIN, False, True), (Role.MEMBER, True, True), (Role.MEMBER, False, False),
    (Role.VIEWER, True, False), (None, True, False),
])
def test_members_manage_their_own_jobs_and_admins_every_job(tenant, role, own, manages):
    user, colleague = tenant.users["member"], tenant.users["viewer"]
    assert can_manage_job(user, role, (user if own else colleague).pk) is manages


def test_a_jobs_submitter_and_the_projects_admins_read_what_it_keeps(tenant):
    submitter = tenant.users["viewer"]
    assert is_submitter_or_admin(submitter, tenant.project, submitter.pk)
    assert is_submitter_or_admin(tenant.users["admin"], tenant.project, submitter.pk)
    assert not is_submitter_or_admin(tenant.users["member"], tenant.project, submitter.pk)
    assert is_submitter_or_admin(make_user("ops", is_staff=True), tenant.project, submitter.pk)


def test_outside_a_request_nothing_is_remembered(tenant, django_assert_num_queries):
    member = tenant.users["member"]
    project = project_for_user(member, "vision")
    with django_assert_num_queries(1):
        assert role_in_project(member, project) == "member"


def test_a_request_remembers_the_role_for_every_copy_of_the_project_and_forgets_it_after(
        tenant, django_assert_num_queries):
    member = tenant.users["member"]
    with roles_remembered():
        project_for_user(member, "vision")
        with django_assert_num_queries(0):  # another instance of the same project: the request's memo answers
            assert role_in_project(member, tenant.project) == "member"
    with roles_remembered(), django_assert_num_queries(1):  # the next request starts with nothing remembered
        assert role_in_project(member, tenant.project) == "member"


def test_a_membership_changed_during_the_request_is_read_again(tenant):
    member = tenant.users["member"]
    with roles_remembered():
        project = project_for_user(member, "vision")
        membership = Membership.objects.get(user=member, project=project)
        membership.role = Role.VIEWER
        membership.save()
        assert role_in_project(member, project) == "viewer"
        membership.delete()
        assert role_in_project(member, project) is None


def test_the_middleware_gives_each_request_its_own_memo(tenant, rf, django_assert_num_queries):
    member = tenant.users["member"]

    def view(request):
        project_for_user(member, "vision")
        with django_assert_num_queries(0):
            assert role_in_project(member, tenant.project) == "member"
        return HttpResponse()

    RoleMemoMiddleware(view)(rf.get("/"))
    with django_assert_num_queries(1):  # the request ended: its memo with it
        assert role_in_project(member, tenant.project) == "member"
