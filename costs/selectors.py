"""Reads of the price catalog (not tenant data: every signed-in user reads it), the projects whose costs a user
sees (members their projects, platform staff all), and budgets (every role of the project reads them)."""

from __future__ import annotations

from datetime import date

from django.db.models import QuerySet

from costs.models import (
    Budget,
    BudgetAlert,
    ClassDiscount,
    CpuPrice,
    DevicePrice,
    MemoryPrice,
    OrganizationBudget,
    SpendAnomalyRule,
    TidalRate,
    UsageSegment,
    UserBudget,
)
from tenancy.models import Project
from tenancy.selectors import User, organizations_for_user, project_ids_for_user


def device_prices() -> QuerySet[DevicePrice]:
    return DevicePrice.objects.select_related("flavor", "cluster")


def cpu_prices() -> QuerySet[CpuPrice]:
    return CpuPrice.objects.all()


def memory_prices() -> QuerySet[MemoryPrice]:
    return MemoryPrice.objects.select_related("flavor", "cluster")


def class_discounts() -> QuerySet[ClassDiscount]:
    return ClassDiscount.objects.select_related("priority_class")


def tidal_rates() -> QuerySet[TidalRate]:
    return TidalRate.objects.all()


def report_projects(user: User) -> QuerySet:
    """The ids of the projects whose usage and costs `user` may see."""
    return project_ids_for_user(user)


def usage_metered(projects: QuerySet) -> bool:
    """Whether any usage of these projects was ever metered (a fresh installation has none)."""
    return UsageSegment.objects.filter(project_id__in=projects).exists()


def budgets_for_user(user: User) -> QuerySet[Budget]:
    return Budget.objects.filter(project_id__in=project_ids_for_user(user)).select_related("project")


def budget_of(project: Project) -> Budget | None:
    """The project's budget (the caller has checked the project is the user's)."""
    return Budget.objects.filter(project=project).select_related("project").first()


def budget_alerts(project: Project, month: date) -> QuerySet[BudgetAlert]:
    return BudgetAlert.objects.filter(project=project, month=month).order_by("threshold")


def organization_budgets_for_user(user: User) -> QuerySet[OrganizationBudget]:
    """The budgets of the organizations the user sees (a member of one of their projects; staff all)."""
    return (OrganizationBudget.objects.filter(organization__in=organizations_for_user(user).values("id"))
            .select_related("organization"))


def user_budgets_for_user(user: User) -> QuerySet[UserBudget]:
    """A user's own budget; platform staff see every user's."""
    if not user.is_authenticated:
        return UserBudget.objects.none()
    budgets = UserBudget.objects.select_related("user")
    return budgets if user.is_staff else budgets.filter(user_id=user.pk)


def budget_organizations() -> QuerySet:
    """Organizations a budget may name: the endpoint is written by platform staff only (others get 403 first)."""
    from tenancy.models import Organization

    return Organization.objects.all()


def budget_users() -> QuerySet:
    """Users a budget may name: the endpoint is written by platform staff only (others get 403 first)."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.all()


def anomaly_rules_for_user(user: User) -> QuerySet[SpendAnomalyRule]:
    return SpendAnomalyRule.objects.filter(project_id__in=project_ids_for_user(user)).select_related("project")
