"""Demo quotas: the three Acme projects share the cluster as one cohort, with guarantees and borrowing."""

from __future__ import annotations

from quotas.models import Quota, ResourceFlavor
from quotas.services import quota_save
from tenancy.models import Project
from tenancy.services import project_save

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


ACTOR = "seed_demo"


def seed_quotas() -> None:
    """Create the demo quotas that are missing, through the same service as the console and the API."""
    for slug, flavor, guaranteed, borrow, lend in QUOTAS:
        project = Project.objects.filter(slug=slug).first()
        if project is None or Quota.objects.filter(project=project, flavor__name=flavor).exists():
            continue
        quota_save(actor=ACTOR, quota=Quota(project=project, flavor=ResourceFlavor.objects.get(name=flavor)),
                   values={"guaranteed": guaranteed, "borrow_limit": borrow, "lend_limit": lend})
    robotics = Project.objects.filter(slug="robotics", max_running_jobs__isnull=True).first()
    if robotics is not None:
        project_save(actor=ACTOR, project=robotics, values={"max_running_jobs": 6})
