"""Demo quotas: the three Acme projects share the cluster as one cohort, with guarantees and borrowing."""

from __future__ import annotations

from quotas.models import Quota, ResourceFlavor
from tenancy.models import Project

# project, flavor, guaranteed, borrow limit, lend limit
QUOTAS = [
    ("language", "nvidia-h100-80gb", 40, 24, None),
    ("vision", "nvidia-h100-80gb", 16, 16, None),
    ("robotics", "nvidia-h100-80gb", 8, 8, 8),
    ("vision", "nvidia-a100-40gb", 32, 16, None),
    ("robotics", "nvidia-a100-40gb", 16, 16, None),
    ("language", "ascend-910b", 16, 0, None),
    ("globex-llm", "nvidia-a100-40gb", 0, 8, None),
]


def seed_quotas() -> None:
    for slug, flavor, guaranteed, borrow, lend in QUOTAS:
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            continue
        Quota.objects.get_or_create(project=project, flavor=ResourceFlavor.objects.get(name=flavor), defaults={
            "guaranteed": guaranteed, "borrow_limit": borrow, "lend_limit": lend})
    Project.objects.filter(slug="robotics", max_running_jobs__isnull=True).update(max_running_jobs=6)
