"""Every write of a flavor, priority class, cluster, node, quota, organization, project, membership or token goes
through its service, whatever the door (API, admin console, what-if apply, management command): it is validated,
audited, and (catalog and quota writes) wakes the scheduler only once the transaction committed."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client

from clusters.models import Cluster, Node
from core import wakeup
from quotas.models import PriorityClass, Quota, ResourceFlavor
from tenancy.models import ApiToken, AuditEntry, Membership, Organization, Project
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def wakes(monkeypatch) -> list[str]:
    """Wake-ups, as they happen."""
    calls: list[str] = []
    monkeypatch.setattr(wakeup, "wake_scheduler", lambda: calls.append("wake"))
    return calls


@pytest.fixture
def committed(django_capture_on_commit_callbacks, wakes):
    """Run a write; assert it woke the scheduler only after commit."""
    def run(write):
        with django_capture_on_commit_callbacks(execute=True):
            result = write()
            assert wakes == [], "woke the scheduler before the transaction committed"
        assert wakes, "never woke the scheduler"
        wakes.clear()
        return result

    return run


@pytest.fixture
def console(db) -> Client:
    client = Client()
    client.force_login(make_user("root", is_staff=True, is_superuser=True))
    return client


def actions() -> list[str]:
    """What the audit log recorded, oldest first (the test clients' own tokens aside)."""
    return list(AuditEntry.objects.exclude(action__startswith="token.").order_by("id")
                .values_list("action", flat=True))


def flavor(name: str = "nvidia-h100-80gb") -> ResourceFlavor:
    return ResourceFlavor.objects.create(name=name, vendor="nvidia", device_resource="nvidia.com/gpu")


def test_flavors_through_the_api(staff_client, committed):
    body = {"name": "nvidia-l4", "vendor": "nvidia", "device_resource": "nvidia.com/gpu"}
    assert committed(lambda: staff_client.post("/api/v1/flavors/", body, format="json")).status_code == 201
    changed = committed(lambda: staff_client.patch("/api/v1/flavors/nvidia-l4/", {"vendor": "NVIDIA"}, format="json"))
    assert changed.status_code == 200
    assert committed(lambda: staff_client.delete("/api/v1/flavors/nvidia-l4/")).status_code == 204
    assert actions() == ["resourceflavor.create", "resourceflavor.change", "resourceflavor.delete"]
    assert AuditEntry.objects.get(action="resourceflavor.change").changes == {"vendor": ["nvidia", "NVIDIA"]}


def test_flavors_and_their_bulk_delete_through_the_admin_console(console, committed):
    form = {"name": "nvidia-l4", "vendor": "nvidia", "device_resource": "nvidia.com/gpu", "arch": "amd64"}
    assert committed(lambda: console.post("/admin/quotas/resourceflavor/add/", form)).status_code == 302
    l4, other = ResourceFlavor.objects.get(name="nvidia-l4"), flavor("nvidia-t4")
    committed(lambda: console.post("/admin/quotas/resourceflavor/", {
        "action": "delete_selected", "_selected_action": [l4.pk, other.pk], "post": "yes"}))
    assert not ResourceFlavor.objects.exists()
    assert actions() == ["resourceflavor.create", "resourceflavor.delete", "resourceflavor.delete"]


def test_a_new_default_priority_class_takes_over_the_default(staff_client, committed):
    old = PriorityClass.objects.get(is_default=True)
    body = {"name": "batch", "value": 300, "is_default": True}
    response = committed(lambda: staff_client.post("/api/v1/priority-classes/", body, format="json"))
    assert response.status_code == 201, response.content
    old.refresh_from_db()
    assert not old.is_default and PriorityClass.objects.get(name="batch").is_default
    assert AuditEntry.objects.get(action="priorityclass.change").changes == {"is_default": [True, False]}


def test_a_taken_name_is_refused_naming_the_field(db):
    from quotas import services

    flavor("nvidia-l4")
    from core.errors import DomainError

    with pytest.raises(DomainError) as error:
        services.flavor_save(actor="test", flavor=ResourceFlavor(name="nvidia-l4", vendor="x", device_resource="y"))
    assert error.value.field == "name" and actions() == []


def test_clusters_through_the_api_audit_without_the_kubeconfig(staff_client, committed):
    from tests.clusters.test_cluster_api import KUBECONFIG, SECRET

    body = {"name": "gpu", "backend": "kubernetes", "kubeconfig": KUBECONFIG}
    assert committed(lambda: staff_client.post("/api/v1/clusters/", body, format="json")).status_code == 201
    patched = committed(lambda: staff_client.patch("/api/v1/clusters/gpu/", {"enabled": False, "kubeconfig": ""},
                                                   format="json"))
    assert patched.status_code == 200 and not Cluster.objects.get(name="gpu").has_kubeconfig
    assert committed(lambda: staff_client.delete("/api/v1/clusters/gpu/")).status_code == 204
    assert actions() == ["cluster.create", "cluster.change", "cluster.delete"]
    change = AuditEntry.objects.get(action="cluster.change").changes
    assert change == {"enabled": [True, False], "kubeconfig": "(replaced, not shown)"}
    assert SECRET not in str(list(AuditEntry.objects.values_list("changes", flat=True)))


def test_nodes_through_the_api_the_console_its_actions_and_the_clusters_inline(staff_client, console, committed):
    h100 = flavor()
    cluster = Cluster.objects.create(name="sim")
    node = Node.objects.create(cluster=cluster, name="n1", flavor=h100, devices=8)
    cordoned = committed(lambda: staff_client.patch(f"/api/v1/nodes/{node.pk}/", {"cordoned": True}, format="json"))
    assert cordoned.status_code == 200
    committed(lambda: console.post("/admin/clusters/node/", {
        "action": "mark_not_ready", "_selected_action": [node.pk]}))
    node.refresh_from_db()
    assert node.cordoned and not node.ready
    inline = {"name": "sim", "backend": "simulated", "description": "", "enabled": "on", "qps": "50",
              "burst": "100", "namespace_pattern": "tidal-{project}", "image_pull_secret": "",
              "nccl_socket_ifname": "eth0", "nccl_extra_env": "{}", "rdma_resource": "rdma/hca",
              "gpu_tolerations": "[]", "topology_block_key": "b", "topology_rack_key": "r",
              "topology_switch_key": "s", "termination_grace_seconds": "30", "pending_timeout_seconds": "600",
              "shm_size": "16Gi", "cluster_domain": "cluster.local",
              "flavor_rules-TOTAL_FORMS": "0", "flavor_rules-INITIAL_FORMS": "0",
              "nodes-TOTAL_FORMS": "2", "nodes-INITIAL_FORMS": "1",
              "nodes-0-id": node.pk, "nodes-0-cluster": cluster.pk, "nodes-0-name": "n1", "nodes-0-flavor": h100.pk,
              "nodes-0-devices": "8", "nodes-0-foreign_used": "0", "nodes-0-DELETE": "on",
              "nodes-1-cluster": cluster.pk, "nodes-1-name": "n2", "nodes-1-flavor": h100.pk,
              "nodes-1-devices": "4", "nodes-1-foreign_used": "0", "nodes-1-ready": "on"}
    response = committed(lambda: console.post(f"/admin/clusters/cluster/{cluster.pk}/change/", inline))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(cluster.nodes.values_list("name", flat=True)) == ["n2"]
    assert actions() == ["node.change", "node.change", "cluster.change", "node.create", "node.delete"]
    assert AuditEntry.objects.filter(action="node.change").order_by("id").last().changes == {"ready": [True, False]}


def test_quotas_through_the_admin_console_and_its_bulk_delete(tenant, console, committed):
    quota = Quota.objects.create(project=tenant.project, flavor=flavor(), guaranteed=8)
    committed(lambda: console.post("/admin/quotas/quota/", {
        "action": "delete_selected", "_selected_action": [quota.pk], "post": "yes"}))
    assert actions() == ["quota.delete"] and AuditEntry.objects.get().project == tenant.project


def test_projects_through_the_api_and_the_console(tenant, clients, console, committed):
    response = clients["owner"].patch(f"/api/v1/projects/{tenant.project.slug}/", {"description": "vision models"},
                                      format="json")
    assert response.status_code == 200
    change = AuditEntry.objects.get(action="project.change")
    assert change.changes == {"description": ["", "vision models"]} and change.project == tenant.project
    form = {"organization": tenant.organization.pk, "name": "Vision", "slug": "vision",
            "description": "vision models", "max_running_jobs": "4", "elastic_jobs": "on",
            "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0"}
    response = committed(lambda: console.post(f"/admin/tenancy/project/{tenant.project.pk}/change/", form))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Project.objects.get(pk=tenant.project.pk).max_running_jobs == 4
    last = AuditEntry.objects.filter(action="project.change").order_by("id").last()
    assert last.changes == {"max_running_jobs": [None, 4]}


def test_a_duplicate_project_slug_is_a_400_not_a_500(tenant, clients):
    body = {"organization_slug": tenant.organization.slug, "name": "Again", "slug": tenant.project.slug}
    response = clients["owner"].post("/api/v1/projects/", body, format="json")
    assert response.status_code == 400 and "slug" in str(response.json()["error"])


def test_the_demo_command_writes_through_the_services(db, wakes):
    call_command("seed_demo", verbosity=0)
    assert {"resourceflavor.create", "cluster.create", "node.create", "quota.create", "project.create"} <= set(
        actions())
    assert set(AuditEntry.objects.values_list("actor_name", flat=True)) == {"seed_demo"}
    created = AuditEntry.objects.count()
    call_command("seed_demo", verbosity=0)  # again: nothing is written twice
    assert AuditEntry.objects.count() == created


def test_organizations_through_the_console(db, console):
    assert console.post("/admin/tenancy/organization/add/", {
        "name": "Initech", "slug": "initech", "projects-TOTAL_FORMS": "0", "projects-INITIAL_FORMS": "0",
    }).status_code == 302
    initech = Organization.objects.get(slug="initech")
    assert console.post(f"/admin/tenancy/organization/{initech.pk}/change/", {
        "name": "Initech Labs", "slug": "initech", "projects-TOTAL_FORMS": "0", "projects-INITIAL_FORMS": "0",
    }).status_code == 302
    assert console.post(f"/admin/tenancy/organization/{initech.pk}/delete/", {"post": "yes"}).status_code == 302
    assert actions() == ["organization.create", "organization.change", "organization.delete"]
    assert AuditEntry.objects.get(action="organization.change").changes == {"name": ["Initech", "Initech Labs"]}


def test_memberships_through_the_console_and_the_projects_inline(tenant, console):
    newcomer, other = make_user("newcomer"), make_user("other")
    assert console.post("/admin/tenancy/membership/add/", {
        "project": tenant.project.pk, "user": newcomer.pk, "role": "viewer"}).status_code == 302
    added = Membership.objects.get(user=newcomer)
    assert console.post(f"/admin/tenancy/membership/{added.pk}/change/", {"role": "member"}).status_code == 302
    assert console.post(f"/admin/tenancy/membership/{added.pk}/delete/", {"post": "yes"}).status_code == 302
    rows = list(tenant.project.memberships.order_by("pk"))
    inline = {"organization": tenant.organization.pk, "name": "Vision", "slug": "vision", "description": "",
              "max_running_jobs": "", "elastic_jobs": "on", "memberships-TOTAL_FORMS": str(len(rows) + 1),
              "memberships-INITIAL_FORMS": str(len(rows))}
    for n, row in enumerate(rows):
        inline.update({f"memberships-{n}-id": row.pk, f"memberships-{n}-project": tenant.project.pk,
                       f"memberships-{n}-user": row.user_id, f"memberships-{n}-role": row.role})
        if row.role == "viewer":
            inline[f"memberships-{n}-role"] = "member"
        if row.role == "member":
            inline[f"memberships-{n}-DELETE"] = "on"
    inline.update({f"memberships-{len(rows)}-project": tenant.project.pk,
                   f"memberships-{len(rows)}-user": other.pk, f"memberships-{len(rows)}-role": "admin"})
    response = console.post(f"/admin/tenancy/project/{tenant.project.pk}/change/", inline)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert actions() == ["membership.add", "membership.change_role", "membership.remove",
                         "membership.change_role", "membership.add", "membership.remove"]
    assert all(entry.project == tenant.project for entry in AuditEntry.objects.filter(action__startswith="member"))


def test_a_rule_a_service_enforces_is_a_message_in_the_console_not_a_server_error(tenant, console):
    owner = Membership.objects.get(project=tenant.project, role="owner")
    response = console.post(f"/admin/tenancy/membership/{owner.pk}/change/", {"role": "viewer"}, follow=True)
    assert response.status_code == 200 and "A project must keep at least one owner." in response.content.decode()
    owner.refresh_from_db()
    assert owner.role == "owner" and actions() == []


def test_tokens_through_the_console_revoked_and_deleted(tenant, console):
    from tenancy.services import token_create

    tokens = [token_create(user=tenant.users["member"], name=f"laptop-{n}")[0] for n in range(3)]
    AuditEntry.objects.all().delete()
    console.post("/admin/tenancy/apitoken/", {"action": "revoke", "_selected_action": [tokens[0].pk]})
    tokens[0].refresh_from_db()
    assert tokens[0].revoked_at is not None
    assert console.post(f"/admin/tenancy/apitoken/{tokens[1].pk}/delete/", {"post": "yes"}).status_code == 302
    console.post("/admin/tenancy/apitoken/", {"action": "delete_selected", "_selected_action": [tokens[2].pk],
                                              "post": "yes"})
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == [
        "token.revoke", "apitoken.delete", "apitoken.delete"]
    assert not ApiToken.objects.filter(pk__in=[tokens[1].pk, tokens[2].pk]).exists()


def test_console_deletes_of_flavors_clusters_and_nodes(db, console, committed):
    h100 = flavor()
    spare = flavor("nvidia-l4")
    cluster = Cluster.objects.create(name="sim")
    node = Node.objects.create(cluster=cluster, name="n1", flavor=h100, devices=8)
    for path in (f"/admin/clusters/node/{node.pk}/delete/", f"/admin/clusters/cluster/{cluster.pk}/delete/",
                 f"/admin/quotas/resourceflavor/{spare.pk}/delete/"):
        assert committed(lambda path=path: console.post(path, {"post": "yes"})).status_code == 302
    assert actions() == ["node.delete", "cluster.delete", "resourceflavor.delete"]
