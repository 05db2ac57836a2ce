"""REST API for organizations, projects, memberships, tokens, the audit log and the current user."""

from __future__ import annotations

import django_filters
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import DomainError
from core.filters import MomentFilter, name_filter
from tenancy import selectors, services
from tenancy.filters import project_filter
from tenancy.models import ApiToken, AuditEntry, Membership, Project, Role
from tenancy.scoping import ScopedViewSet
from tenancy.serializers import (
    ApiTokenCreatedSerializer,
    ApiTokenSerializer,
    AuditEntrySerializer,
    MembershipSerializer,
    MeSerializer,
    OrganizationSerializer,
    ProjectSerializer,
)


class OrganizationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    """Organizations the caller belongs to (through a project). Platform staff manage them in the admin console."""

    selector = staticmethod(selectors.organizations_for_user)
    serializer_class = OrganizationSerializer
    project_attr = None
    lookup_field = "slug"
    ordering_fields = ["name", "created_at"]


class ProjectFilter(django_filters.FilterSet):
    organization = name_filter("organization", noun="organization", visible=selectors.organizations_for_user,
                               to_field_name="slug")

    class Meta:
        model = Project
        fields = ["organization", "archived"]


class ProjectViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    ScopedViewSet,
):
    selector = staticmethod(selectors.projects_for_user)
    serializer_class = ProjectSerializer
    lookup_field = "slug"
    write_role = Role.ADMIN
    filterset_class = ProjectFilter
    ordering_fields = ["slug", "name", "created_at"]

    def project_of(self, obj: Project) -> Project:
        return obj

    def perform_create(self, serializer: ProjectSerializer) -> None:
        # New projects go into an organization where the caller already owns a project (or staff).
        values = dict(serializer.validated_data)
        slug = values.pop("organization_slug", None)
        archived = values.pop("archived", False)  # archiving is a service of its own, as in perform_update
        organization = selectors.organizations_for_user(self.request.user).filter(slug=slug).first()
        if organization is None:
            raise DomainError("Unknown organization.", field="organization_slug")
        owns_one = self.request.user.is_staff or selectors.projects_for_user(
            self.request.user, min_role=Role.OWNER
        ).filter(organization=organization).exists()
        if not owns_one:
            raise PermissionDenied("Only owners of a project in this organization can create projects in it.")
        project = services.project_create(actor=self.request.user, organization=organization, **values)
        if archived:
            project = services.project_archive(actor=self.request.user, project=project)
        serializer.instance = project

    def perform_update(self, serializer: ProjectSerializer) -> None:
        values = dict(serializer.validated_data)
        values.pop("organization_slug", None)
        archived = values.pop("archived", None)
        project = services.project_save(actor=self.request.user, project=serializer.instance, values=values)
        if archived is not None and archived != project.archived:
            services.project_archive(actor=self.request.user, project=project, archived=archived)
        serializer.instance = project

    def perform_destroy(self, instance: Project) -> None:
        self.require_role(instance, Role.OWNER)
        services.project_delete(actor=self.request.user, project=instance)


class MembershipFilter(django_filters.FilterSet):
    project = project_filter()
    user = name_filter("user", noun="user", visible=selectors.users_sharing_a_project_with, to_field_name="username")

    class Meta:
        model = Membership
        fields = ["project", "user", "role"]


class MembershipViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    ScopedViewSet,
):
    """Members of the caller's projects. Admins and owners add, change and remove them; anyone may leave."""

    selector = staticmethod(selectors.memberships_for_user)
    serializer_class = MembershipSerializer
    write_role = Role.ADMIN
    filterset_class = MembershipFilter
    ordering_fields = ["created_at", "role"]

    def check_object_permissions(self, request: Request, obj: Membership) -> None:
        if self.action == "destroy" and obj.user_id == request.user.pk:
            return  # leaving a project needs no role
        super().check_object_permissions(request, obj)

    def perform_create(self, serializer: MembershipSerializer) -> None:
        data = serializer.validated_data
        self.require_role(data["project"])
        serializer.instance = services.membership_add(
            actor=self.request.user, project=data["project"], user=data["user"], role=data["role"]
        )

    def perform_update(self, serializer: MembershipSerializer) -> None:
        role = serializer.validated_data.get("role", serializer.instance.role)
        serializer.instance = services.membership_change_role(
            actor=self.request.user, membership=serializer.instance, role=role
        )

    def perform_destroy(self, instance: Membership) -> None:
        services.membership_remove(actor=self.request.user, membership=instance)


class ApiTokenViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin,
    ScopedViewSet,
):
    """The caller's personal API tokens. The secret is returned once, at creation; DELETE revokes."""

    selector = staticmethod(selectors.tokens_for_user)
    serializer_class = ApiTokenSerializer
    project_attr = None
    ordering_fields = ["created_at", "name", "last_used_at"]
    filterset_fields = ["name"]

    @extend_schema(responses={201: ApiTokenCreatedSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token, secret = services.token_create(user=request.user, **serializer.validated_data)
        body = ApiTokenCreatedSerializer(token, context=self.get_serializer_context()).data
        body["token"] = secret
        return Response(body, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance) -> None:
        services.token_revoke(actor=self.request.user, token=instance)


class AuditFilter(django_filters.FilterSet):
    # Any project of the caller: a viewer naming her own project gets an empty page (its audit is for admins),
    # not "no such project".
    project = project_filter()
    since = MomentFilter(field_name="created_at", lookup_expr="gte")

    class Meta:
        model = AuditEntry
        fields = ["project", "action", "since"]


class AuditEntryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    """The audit log of projects the caller administers."""

    selector = staticmethod(selectors.audit_for_user)
    serializer_class = AuditEntrySerializer
    filterset_class = AuditFilter
    ordering_fields = ["created_at"]


class MeView(APIView):
    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        user = request.user
        data = {
            "id": user.pk,
            "username": user.get_username(),
            "email": user.email,
            "is_staff": user.is_staff,
            "read_only": isinstance(request.auth, ApiToken) and request.auth.read_only,
            "memberships": selectors.memberships_for_user(user).filter(user=user).select_related(
                "project__organization"
            ),
        }
        return Response(MeSerializer(data).data)
