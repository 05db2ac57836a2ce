from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.serializers import StrictModelSerializer, StrictSerializer
from tenancy import permissions, selectors
from tenancy.models import ApiToken, AuditEntry, Membership, Organization, Project, Role


@extend_schema_field(OpenApiTypes.STR)
class ScopedProjectField(serializers.SlugRelatedField):
    """A project given by slug, looked up only among projects the caller can see.

    Another tenant's project reads "does not exist", exactly like a missing one.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("slug_field", "slug")
        super().__init__(**kwargs)

    def get_queryset(self):
        return selectors.projects_for_user(self.context["request"].user)

    def to_internal_value(self, data) -> Project:
        if not isinstance(data, str):
            self.fail("invalid")
        project = selectors.project_for_user(self.context["request"].user, data)
        if project is None:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data[:100])
        return project  # type: ignore[return-value]  # not None: DRF's fail() raises, unknown without its stubs


class OrganizationSerializer(StrictModelSerializer):
    class Meta:
        model = Organization
        fields = ["id", "name", "slug", "created_at"]
        read_only_fields = ["id", "created_at"]


class ProjectSerializer(StrictModelSerializer):
    organization = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    organization_slug = serializers.SlugField(write_only=True, max_length=40, required=False)
    role = serializers.SerializerMethodField()

    class Meta:
        model = Project
        fields = ["id", "organization", "organization_slug", "name", "slug", "description", "archived", "role",
                  "created_at"]
        read_only_fields = ["id", "created_at", "role"]

    def get_role(self, project: Project) -> str | None:
        return permissions.role_in_project(self.context["request"].user, project)


class MembershipSerializer(StrictModelSerializer):
    project = ScopedProjectField()
    user = serializers.SlugRelatedField(slug_field="username", queryset=selectors.active_users())
    role = serializers.ChoiceField(choices=Role.choices, default=Role.MEMBER)

    class Meta:
        model = Membership
        fields = ["id", "project", "user", "role", "created_at"]
        read_only_fields = ["id", "created_at"]

    def validate(self, attrs):
        if self.instance is not None:
            for field in ("project", "user"):
                if field in attrs and attrs[field] != getattr(self.instance, field):
                    raise serializers.ValidationError({field: ["Cannot be changed; remove and add instead."]})
        return attrs


class ApiTokenSerializer(StrictModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "read_only", "created_at", "expires_at", "last_used_at", "revoked_at"]
        read_only_fields = ["id", "prefix", "created_at", "last_used_at", "revoked_at"]


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret. Shown only in this response.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]


class AuditEntrySerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = AuditEntry
        fields = ["id", "created_at", "actor_name", "project", "action", "target_type", "target_id", "target_repr",
                  "changes"]


class MeMembershipSerializer(serializers.Serializer):
    project = serializers.CharField(source="project.slug")
    organization = serializers.CharField(source="project.organization.slug")
    role = serializers.CharField()


class MeSerializer(StrictSerializer):
    id = serializers.IntegerField(read_only=True)
    username = serializers.CharField(read_only=True)
    email = serializers.EmailField(read_only=True)
    is_staff = serializers.BooleanField(read_only=True)
    read_only = serializers.BooleanField(read_only=True, help_text="The token of this request can only read.")
    memberships = MeMembershipSerializer(many=True, read_only=True)
