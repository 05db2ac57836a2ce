"""The telemetry API and pages: tenancy (another organization's telemetry is a 404, the shared cross-tenant tests),
the sources' bad input (a 400 naming the field), and what the job, jobs, runs and Clusters pages show."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from quotas.models import Quota
from telemetry import simulated
from telemetry.models import TelemetrySource
from tests.crosstenant import CrossTenantMixin
from tests.jobs.conftest import run, submit


def running_job(tenant, inventory, *, project=None, user="member", nodes=("r1-n1",), **labels):
    """A job running ten minutes on the simulated cluster, its telemetry made."""
    if project is not None and not Quota.objects.filter(project=project).exists():
        Quota.objects.create(project=project, flavor=inventory["h100"], guaranteed=16, borrow_limit=0)
    job = submit(tenant, inventory["h100"], project=project, user=user, replicas=len(nodes), devices=8,
                 labels=labels)
    job = run(job, inventory["cluster"], list(nodes), now=timezone.now() - timedelta(minutes=10))
    simulated.tick()
    return job


class TestAttemptTelemetry(CrossTenantMixin):
    basename = "gpu-telemetry"
    writable = False

    @pytest.fixture(autouse=True)
    def _inventory(self, inventory):
        self.inventory = inventory

    def make_object(self, tenant, project):
        outsider = project != tenant.project
        job = running_job(tenant, self.inventory, project=project, user="outsider" if outsider else "member",
                          nodes=("r2-n1",) if outsider else ("r1-n1",))
        return SimpleNamespace(pk=job.current_attempt.pk, job=job)

    def test_a_member_reads_the_gpus_and_their_readings(self, tenant, clients):
        obj = self.victim(tenant)
        body = clients["viewer"].get(self.detail_url(obj), {"buckets": 10}).json()
        assert body["job"] == obj.job.pk and body["attempt"] == 1 and 20 < body["sm_active"] < 75
        assert [g["ordinal"] for g in body["gpus"]] == list(range(8))
        sm = body["readings"]["series"]["sm_active"]
        assert set(sm) == {str(i) for i in range(8)} and all(len(line) == 10 for line in sm.values())
        assert all(v is None or 0 <= v <= 100 for line in sm.values() for v in line)
        listed = clients["viewer"].get(self.list_url(), {"job": obj.job.pk}).json()["results"]
        assert [row["id"] for row in listed] == [obj.pk]

    def test_buckets_out_of_range_is_a_400_naming_it(self, tenant, clients):
        obj = self.victim(tenant)
        for bad in ("0", "241", "ten"):
            response = clients["viewer"].get(self.detail_url(obj), {"buckets": bad})
            assert response.status_code == 400
            assert "buckets" in response.json()["error"]["fields"]

    def test_a_job_filter_beyond_any_id_is_a_400_naming_it(self, tenant, clients):
        for bad in (str(10**30), "1.5", "-1"):
            response = clients["viewer"].get(self.list_url(), {"job": bad})
            assert response.status_code == 400, response.content
            assert "job" in response.json()["error"]["fields"]


@pytest.fixture
def kube_cluster(db):
    return Cluster.objects.create(name="kube-b", backend=Cluster.Backend.KUBERNETES)


def test_staff_configure_a_clusters_labels_others_read_them(clients, staff_client, kube_cluster):
    url = reverse("telemetry-source-list")
    assert clients["owner"].post(url, {"cluster": "kube-b"}, format="json").status_code == 403
    response = staff_client.post(url, {"cluster": "kube-b", "pod_label": "exported_pod", "selector":
                                       'cluster="b", env=~"prod|stage"'}, format="json")
    assert response.status_code == 201, response.content
    detail = reverse("telemetry-source-detail", args=["kube-b"])
    assert clients["viewer"].get(detail).json()["pod_label"] == "exported_pod"
    assert clients["owner"].patch(detail, {"gpu_label": "gpu_index"}, format="json").status_code == 403
    assert staff_client.patch(detail, {"gpu_label": "gpu_index"}, format="json").status_code == 200
    source = TelemetrySource.objects.get(cluster=kube_cluster)
    assert (source.pod_label, source.gpu_label, source.node_label) == ("exported_pod", "gpu_index", "Hostname")


@pytest.mark.parametrize(("body", "field"), [
    ({"pod_label": "pod-name"}, "pod_label"),
    ({"node_label": ""}, "node_label"),
    ({"gpu_label": "__name__"}, "gpu_label"),
    ({"uuid_label": "1uuid"}, "uuid_label"),
    ({"host_label": "instance:port"}, "host_label"),
    ({"selector": 'cluster=b'}, "selector"),
    ({"selector": '__name__="up"'}, "selector"),
    ({"pod_label": "x" * 101}, "pod_label"),
])
def test_a_bad_label_config_is_a_400_naming_the_field(staff_client, kube_cluster, body, field):
    TelemetrySource.objects.create(cluster=kube_cluster)
    response = staff_client.patch(reverse("telemetry-source-detail", args=["kube-b"]), body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    source = TelemetrySource.objects.get(cluster=kube_cluster)
    assert (source.pod_label, source.node_label, source.gpu_label, source.selector) == ("pod", "Hostname", "gpu", "")


def test_a_source_for_a_cluster_that_does_not_exist_is_a_400(staff_client, db):
    response = staff_client.post(reverse("telemetry-source-list"), {"cluster": "nope"}, format="json")
    assert response.status_code == 400 and "cluster" in response.json()["error"]["fields"]


# ---------------------------------------------------------------------------------------------------- pages

def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_job_page_shows_each_gpus_activity_and_the_jobs_table_its_efficiency(tenant, inventory):
    job = running_job(tenant, inventory)
    page = page_client(tenant.users["viewer"]).get(reverse("job_detail", args=[job.pk])).content.decode()
    assert 'id="job-gpus"' in page and page.count('<th scope="row"') == 8
    assert "GPU efficiency" in page and "% SM activity" in page and "<polyline" in page
    table = page_client(tenant.users["viewer"]).get(reverse("jobs")).content.decode()
    assert "GPU efficiency" in table and "% SM</td>" in table


def test_the_runs_table_shows_the_efficiency_of_each_runs_job(tenant, inventory):
    job = running_job(tenant, inventory)
    run_ = job.run
    page = page_client(tenant.users["viewer"]).get(
        reverse("experiment_detail", args=[run_.experiment_id])).content.decode()
    assert "GPU efficiency" in page and "% SM</td>" in page


def test_the_clusters_grid_names_only_the_callers_own_jobs(tenant, inventory):
    mine = running_job(tenant, inventory)
    theirs = running_job(tenant, inventory, project=tenant.other_project, user="outsider", nodes=("r2-n1",))
    page = page_client(tenant.users["viewer"]).get(reverse("clusters")).content.decode()
    assert page.count("% SM active (#") == 8 and f"#{mine.pk} vision" in page
    assert page.count("% SM active (another project)") == 8 and "secret" not in page
    assert f'href="/jobs/{theirs.pk}/"' not in page


def test_the_run_page_charts_the_first_gpus_beside_the_training_metrics(tenant, inventory):
    job = running_job(tenant, inventory, nodes=("r1-n1", "r1-n2"))  # 16 GPUs
    page = page_client(tenant.users["viewer"]).get(reverse("run_detail", args=[job.run.pk])).content.decode()
    assert 'data-key="system/gpu.7.sm_active"' in page and 'data-key="system/gpu.0.utilization"' in page
    assert 'data-key="system/gpu.8.sm_active"' not in page
    assert "The series of 8 more GPUs (from GPU 8 on) are not charted here" in page


def test_the_gpus_api_names_only_the_callers_own_jobs(tenant, inventory, clients):
    mine = running_job(tenant, inventory)
    theirs = running_job(tenant, inventory, project=tenant.other_project, user="outsider", nodes=("r2-n1",))
    rows = clients["viewer"].get(reverse("gpu-activity-list"), {"cluster": "sim"}).json()["results"]
    assert len(rows) == 16 and all(row["sm_active"] is not None and 0 <= row["sm_active"] <= 100 for row in rows)
    by_node = {node: [row for row in rows if row["node"] == node] for node in ("r1-n1", "r2-n1")}
    assert {(row["project"], row["job"]) for row in by_node["r1-n1"]} == {("vision", mine.pk)}
    assert {(row["project"], row["job"]) for row in by_node["r2-n1"]} == {("other", None)}
    outsider = clients["outsider"].get(reverse("gpu-activity-list"), {"node": "r2-n1"}).json()["results"]
    assert {(row["project"], row["job"]) for row in outsider} == {("secret", theirs.pk)}
    assert [row["gpu"] for row in outsider] == list(range(8))
