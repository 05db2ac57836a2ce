"""Every tenancy endpoint gets the shared cross-tenant tests."""

from tenancy.audit import audit_record
from tenancy.models import Membership
from tenancy.services import token_create
from tests.conftest import make_user
from tests.crosstenant import CrossTenantMixin


class TestOrganizations(CrossTenantMixin):
    basename = "organization"
    lookup = "slug"
    writable = False

    def make_object(self, tenant, project):
        return project.organization


class TestProjects(CrossTenantMixin):
    basename = "project"
    lookup = "slug"

    def make_object(self, tenant, project):
        return project

    def update_payload(self, tenant, obj):
        return {"description": "changed"}


class TestMemberships(CrossTenantMixin):
    basename = "membership"

    def make_object(self, tenant, project):
        return Membership.objects.create(project=project, user=make_user(f"new-{project.slug}"), role="member")

    def create_payload(self, tenant, project):
        make_user("candidate")
        return {"project": project.slug, "user": "candidate", "role": "member"}

    def update_payload(self, tenant, obj):
        return {"role": "viewer"}


class TestTokens(CrossTenantMixin):
    basename = "token"
    user_owned = True
    detail_writes = ("delete",)  # tokens are revoked, never edited

    def make_object(self, tenant, user):
        return token_create(user=user, name="victim")[0]


class TestAudit(CrossTenantMixin):
    basename = "audit"
    writable = False
    viewer_can_see = False

    def make_object(self, tenant, project):
        return audit_record(actor=tenant.users["owner"], action="test.event", target=project, project=project)
