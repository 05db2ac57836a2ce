"""The `?project=<slug>` list filter every tenant-data endpoint shares (see core/filters.py)."""

from __future__ import annotations

import django_filters

from core.filters import name_filter
from tenancy.selectors import projects_for_user


def project_filter(field_name: str = "project") -> django_filters.ModelChoiceFilter:
    """Any project the caller is a member of (staff: any project); another tenant's reads like a missing one.
    `field_name`: the path to the project of the rows filtered (e.g. "run__project")."""
    return name_filter(field_name, noun="project", visible=projects_for_user, to_field_name="slug")
