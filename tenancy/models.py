"""Organizations contain projects; users reach projects through memberships with a role."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from core.choices import TextChoices

slug_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$",
    "Use 1-40 lowercase letters, digits and dashes, starting and ending with a letter or digit.",
)


def is_slug(text: str) -> bool:
    """Whether `text` can be a project's or organization's slug: one that cannot names nothing, and is never sent
    to the database (PostgreSQL refuses to compare text holding a NUL)."""
    return slug_validator.regex.fullmatch(text) is not None


class Role(TextChoices):
    OWNER = "owner", "Owner"
    ADMIN = "admin", "Admin"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


class Organization(models.Model):
    """A company or lab; its projects form one sharing cohort for quotas."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="projects")
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    description = models.TextField(blank=True, max_length=2000)
    archived = models.BooleanField(default=False)
    max_running_jobs = models.PositiveIntegerField(
        null=True, blank=True, help_text="Cap on jobs admitted or running at once; empty means no cap."
    )
    elastic_jobs = models.BooleanField(
        default=True, help_text="New jobs may be elastic (replicas: {min, max}); off: every new job is a rigid gang."
    )
    # Read by tracking's artifacts (tracking.artifacts.services.quota_bytes); one number, as max_running_jobs is.
    artifact_quota_bytes = models.PositiveBigIntegerField(
        null=True, blank=True,
        help_text="Bytes of run artifacts the project may keep; empty means the default (TIDAL_ARTIFACT_QUOTA_BYTES).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="project_name_per_org")]

    def __str__(self) -> str:
        return self.slug

    def validate_constraints(self, exclude: set[str] | None = None) -> None:
        """The one name per organization rule is about the name (the organization is where the project is, not a
        choice): its error names `name`, where Django's names no field."""
        try:
            super().validate_constraints(exclude=exclude)
        except ValidationError as error:
            errors = error.update_error_dict({})
            general = errors.pop(NON_FIELD_ERRORS, [])
            if any(e.code == "unique_together" for e in general):  # this model's only constraint on two fields
                errors.setdefault("name", []).append(ValidationError(
                    f"{self.organization} already has a project named {self.name}.", code="name_taken"))
            if remaining := [e for e in general if e.code != "unique_together"]:
                errors[NON_FIELD_ERRORS] = remaining
            raise ValidationError(errors) from None


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project__slug", "user__username"]
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user")]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} as {self.role}"


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiToken(models.Model):
    """A personal API token. Only the SHA-256 of the secret is stored; the secret is shown once at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, help_text="First characters of the secret, to recognise it.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    read_only = models.BooleanField(
        default=False, help_text="Only reads (GET, HEAD, OPTIONS): for dashboards, notebooks and CI that only look."
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()


class AuditEntry(models.Model):
    """Who changed what and when. Written by services, never edited."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, help_text="Kept when the actor's account is deleted.")
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit")
    action = models.CharField(max_length=60, db_index=True)
    target_type = models.CharField(max_length=60)
    target_id = models.CharField(max_length=60)
    target_repr = models.CharField(max_length=200)
    changes = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name} {self.action} {self.target_repr}"
