"""Cluster credentials: encrypted at rest, write-only in the API and the admin; connection test and node sync."""

from __future__ import annotations

import pytest
from django.db import connection

from clusters.backends.kubernetes import clients
from clusters.models import Cluster
from tests.conftest import make_user

SECRET = "super-secret-token-123"
KUBECONFIG = (
    "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://k8s.example:6443\n"
    f"users:\n- name: u\n  user:\n    token: {SECRET}\n"
    "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
)


def raw_column(cluster: Cluster) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT kubeconfig_encrypted FROM clusters_cluster WHERE id = %s", [cluster.pk])
        return cursor.fetchone()[0]


def test_kubeconfig_is_encrypted_at_rest(db) -> None:
    cluster = Cluster(name="gpu", backend="kubernetes")
    cluster.set_kubeconfig(KUBECONFIG)
    cluster.save()
    stored = raw_column(cluster)
    assert stored and SECRET not in stored and "k8s.example" not in stored
    assert Cluster.objects.get(pk=cluster.pk).get_kubeconfig() == KUBECONFIG


def test_key_from_settings_and_rotation(db, settings) -> None:
    from cryptography.fernet import Fernet

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.TIDAL = {**settings.TIDAL, "ENCRYPTION_KEY": old}
    cluster = Cluster(name="gpu", backend="kubernetes")
    cluster.set_kubeconfig(KUBECONFIG)
    cluster.save()
    settings.TIDAL = {**settings.TIDAL, "ENCRYPTION_KEY": f"{new},{old}"}  # rotation: new first, old still reads
    assert Cluster.objects.get(pk=cluster.pk).get_kubeconfig() == KUBECONFIG
    settings.TIDAL = {**settings.TIDAL, "ENCRYPTION_KEY": new}
    from core.errors import DomainError

    with pytest.raises(DomainError, match="cannot be decrypted"):
        Cluster.objects.get(pk=cluster.pk).get_kubeconfig()


def test_api_accepts_the_kubeconfig_but_never_returns_it(db, staff_client, clients) -> None:
    body = {"name": "gpu", "backend": "kubernetes", "kubeconfig": KUBECONFIG, "namespace_pattern": "ml-{project}",
            "qps": 20, "burst": 40, "nccl_extra_env": {"NCCL_IB_HCA": "mlx5"}}
    response = staff_client.post("/api/v1/clusters/", body, format="json")
    assert response.status_code == 201, response.content
    assert SECRET not in response.content.decode() and "kubeconfig" not in response.json()
    assert response.json()["has_kubeconfig"] is True and response.json()["qps"] == 20
    cluster = Cluster.objects.get(name="gpu")
    assert SECRET not in raw_column(cluster) and cluster.get_kubeconfig() == KUBECONFIG
    for client in (staff_client, clients["member"]):
        for url in ("/api/v1/clusters/", "/api/v1/clusters/gpu/"):
            assert SECRET not in client.get(url).content.decode()
    patched = staff_client.patch("/api/v1/clusters/gpu/", {"kubeconfig": ""}, format="json")
    assert patched.status_code == 200 and patched.json()["has_kubeconfig"] is False
    assert clients["member"].patch("/api/v1/clusters/gpu/", {"kubeconfig": KUBECONFIG},
                                   format="json").status_code == 403


def test_api_rejects_invalid_kubeconfig_and_reserved_nccl_env(db, staff_client) -> None:
    response = staff_client.post("/api/v1/clusters/", {"name": "x", "kubeconfig": "- a list"}, format="json")
    assert response.status_code == 400 and "kubeconfig" in response.json()["error"]["fields"]
    response = staff_client.post("/api/v1/clusters/", {"name": "y", "nccl_extra_env": {"NCCL_SOCKET_IFNAME": "x"}},
                                 format="json")
    assert response.status_code == 400 and "nccl_extra_env" in response.json()["error"]["fields"]


@pytest.mark.parametrize(("kubeconfig", "words"), [
    (KUBECONFIG + "expires: 2026-13-45\n", "month must be in 1..12"),  # safe_load's ValueError: a 500
    ("a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]\n" for n in range(1, 9)), "aliases repeat"),
])
def test_a_kubeconfig_is_read_within_the_limits_of_a_yaml_body(db, staff_client, kubeconfig, words) -> None:
    """Read by yaml.safe_load, a kubeconfig holding an impossible date answered 500 (the admin's form too: a crawl
    posting odd values into every console form found it), and one of nested aliases was expanded whole."""
    response = staff_client.post("/api/v1/clusters/", {"name": "x", "kubeconfig": kubeconfig}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert list(error["fields"]) == ["kubeconfig"]
    assert words in error["message"] and not Cluster.objects.exists()


def test_admin_form_is_write_only_and_audit_hides_the_text(db, client) -> None:
    from tenancy.models import AuditEntry

    admin = make_user("root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    cluster = Cluster(name="gpu", backend="kubernetes")
    cluster.set_kubeconfig(KUBECONFIG)
    cluster.save()
    page = client.get(f"/admin/clusters/cluster/{cluster.pk}/change/")
    assert page.status_code == 200 and SECRET not in page.content.decode()
    assert "kubeconfig stored (encrypted)" in page.content.decode()
    new = KUBECONFIG.replace(SECRET, "rotated-token-456")
    form = {"name": "gpu", "backend": "kubernetes", "description": "", "enabled": "on", "kubeconfig": new,
            "qps": "50", "burst": "100", "namespace_pattern": "tidal-{project}", "image_pull_secret": "",
            "nccl_socket_ifname": "eth0", "nccl_extra_env": "{}", "rdma_resource": "rdma/hca",
            "gpu_tolerations": '["nvidia.com/gpu"]', "topology_block_key": "tidal.dev/block",
            "topology_rack_key": "tidal.dev/rack", "topology_switch_key": "tidal.dev/switch",
            "termination_grace_seconds": "30", "pending_timeout_seconds": "900", "shm_size": "16Gi",
            "cluster_domain": "cluster.local"}
    for prefix in ("flavor_rules", "nodes"):
        form.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    response = client.post(f"/admin/clusters/cluster/{cluster.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    cluster.refresh_from_db()
    assert cluster.get_kubeconfig() == new and "rotated-token-456" not in raw_column(cluster)
    assert cluster.pending_timeout_seconds == 900
    entry = AuditEntry.objects.filter(action="cluster.change").last()
    assert "rotated-token-456" not in str(entry.changes) and entry.changes["kubeconfig"] == "(replaced, not shown)"
    form["kubeconfig"] = ""  # left empty: the stored one stays
    assert client.post(f"/admin/clusters/cluster/{cluster.pk}/change/", form).status_code == 302
    cluster.refresh_from_db()
    assert cluster.get_kubeconfig() == new


def review_reaction(handler):
    def review(request):
        for key, obj in list(handler.objects.items()):  # kmock stores each review; forget it
            if key[0].plural == "selfsubjectaccessreviews":
                obj.delete()
        attrs = request.data["spec"]["resourceAttributes"]
        allowed = not (attrs["verb"] == "delete" and attrs["resource"] == "pods")
        return {**request.data, "status": {"allowed": allowed}}
    return review


def test_connection_test_reports_version_and_missing_permissions(kube_inventory, kube, staff_client) -> None:
    kube.handler["post /apis/authorization.k8s.io/v1/selfsubjectaccessreviews"] << review_reaction(kube.handler)
    report = clients.cluster_test_connection(kube_inventory["cluster"])
    assert not report.ok and report.error == ""
    assert report.version and report.namespace == "tidal-secret"  # the first project by slug
    assert report.missing == ["delete pods in tidal-secret"]
    assert "missing permissions: delete pods in tidal-secret" in report.summary()
    response = staff_client.post("/api/v1/clusters/gpu/test-connection/")
    assert response.status_code == 200 and response.json()["missing"] == ["delete pods in tidal-secret"]


def test_connection_test_reports_an_unreachable_cluster(db) -> None:
    cluster = Cluster(name="gone", backend="kubernetes")
    cluster.set_kubeconfig(KUBECONFIG.replace("https://k8s.example:6443", "http://127.0.0.1:9"))
    cluster.save()
    from clusters.backends.kubernetes.clients import build_client
    from clusters.kube.ratelimit import Backoff

    client = build_client(cluster, backoff=Backoff(max_retries=0))
    report = clients.cluster_test_connection(cluster, client=client)
    assert not report.ok and "cannot connect" in report.summary()
    missing = clients.cluster_test_connection(Cluster(name="empty", backend="kubernetes"))
    assert "no kubeconfig" in missing.error


def test_admin_actions_test_connection_and_sync_nodes(kube_inventory, kube, client) -> None:
    from tests.clusters.test_node_sync import node

    kube.handler["post /apis/authorization.k8s.io/v1/selfsubjectaccessreviews"] << review_reaction(kube.handler)
    kube.put("nodes", None, node("gpu-1", product="NVIDIA-H100-80GB-HBM3", rack="r1"))
    client.force_login(make_user("root", is_staff=True, is_superuser=True))
    cluster = kube_inventory["cluster"]
    for action, expected in (("test_connection", "missing permissions: delete pods"),
                             ("sync_nodes", "0 new, 1 updated, 1 gone")):
        response = client.post("/admin/clusters/cluster/", {"action": action, "_selected_action": [cluster.pk]},
                               follow=True)
        assert expected in response.content.decode()


def test_free_form_fields_are_bounded(staff_client):
    deep: dict = {"key": "a"}
    for _ in range(10):
        deep = {"key": "a", "more": deep}
    response = staff_client.post("/api/v1/clusters/", {"name": "y", "gpu_tolerations": [deep]}, format="json")
    assert response.status_code == 400, response.content
    assert "Nested more than 10" in response.json()["error"]["fields"]["gpu_tolerations"][0]
