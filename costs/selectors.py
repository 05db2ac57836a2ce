"""Reads of the price catalog (not tenant data: every signed-in user reads it) and the projects whose costs a user
sees (members their projects, platform staff all)."""

from __future__ import annotations

from django.db.models import QuerySet

from costs.models import ClassDiscount, CpuPrice, DevicePrice
from tenancy.selectors import User, project_ids_for_user


def device_prices() -> QuerySet[DevicePrice]:
    return DevicePrice.objects.select_related("flavor", "cluster")


def cpu_prices() -> QuerySet[CpuPrice]:
    return CpuPrice.objects.all()


def class_discounts() -> QuerySet[ClassDiscount]:
    return ClassDiscount.objects.select_related("priority_class")


def report_projects(user: User) -> QuerySet:
    """The ids of the projects whose usage and costs `user` may see."""
    return project_ids_for_user(user)
