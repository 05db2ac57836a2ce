"""Every /api/v1/ route, registered by each app's api module."""

from rest_framework.routers import DefaultRouter

from tenancy import api as tenancy_api

router = DefaultRouter()
router.register("organizations", tenancy_api.OrganizationViewSet, basename="organization")
router.register("projects", tenancy_api.ProjectViewSet, basename="project")
router.register("memberships", tenancy_api.MembershipViewSet, basename="membership")
router.register("tokens", tenancy_api.ApiTokenViewSet, basename="token")
router.register("audit", tenancy_api.AuditEntryViewSet, basename="audit")
