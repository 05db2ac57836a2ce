"""Name filters on every list endpoint: an unknown name is a 400 naming the field, never an empty page.

`?flavor=bogus` used to answer 200 with nothing in it, which reads as "no such jobs" when the truth is a typo. A
project of another tenant must get the very same answer as a project that does not exist (tenancy: never reveal
existence), so the cases below compare the two bodies.
"""

from __future__ import annotations

import pytest

from clusters.models import Cluster, Node
from mlplatform.api_router import router
from quotas.models import Quota, ResourceFlavor
from tests.jobs.conftest import submit

pytestmark = pytest.mark.django_db

# (list URL, query parameter, a name the member may use, what the parameter names)
NAME_FILTERS = [
    ("/api/v1/jobs/", "project", "vision", "project"),
    ("/api/v1/jobs/", "flavor", "nvidia-h100-80gb", "flavor"),
    ("/api/v1/queue/", "project", "vision", "project"),
    ("/api/v1/queue/", "flavor", "nvidia-h100-80gb", "flavor"),
    ("/api/v1/quotas/", "project", "vision", "project"),
    ("/api/v1/quotas/", "flavor", "nvidia-h100-80gb", "flavor"),
    ("/api/v1/nodes/", "cluster", "sim", "cluster"),
    ("/api/v1/nodes/", "flavor", "nvidia-h100-80gb", "flavor"),
    ("/api/v1/jobs/failure-causes/", "project", "vision", "project"),
    ("/api/v1/memberships/", "project", "vision", "project"),
    ("/api/v1/memberships/", "user", "viewer", "user"),
    ("/api/v1/audit/", "project", "vision", "project"),
    ("/api/v1/projects/", "organization", "acme", "organization"),
]
PROJECT_FILTERS = [(url, param) for url, param, _, noun in NAME_FILTERS if noun == "project"]


def label(url: str, param: str) -> str:
    return f"{url.removeprefix('/api/v1/').rstrip('/')}?{param}"


IDS = [label(url, param) for url, param, _, _ in NAME_FILTERS]


@pytest.fixture
def world(tenant):
    """A flavor, a cluster with a node, quotas and a job in vision, and the same in the outsider's project."""
    h100 = ResourceFlavor.objects.create(name="nvidia-h100-80gb", vendor="nvidia", device_resource="nvidia.com/gpu")
    cluster = Cluster.objects.create(name="sim")
    Node.objects.create(cluster=cluster, name="n1", flavor=h100, devices=8, rack="r1", position=1)
    for project in (tenant.project, tenant.other_project):
        Quota.objects.create(project=project, flavor=h100, guaranteed=8, borrow_limit=8)
    submit(tenant, h100)
    submit(tenant, h100, project=tenant.other_project, user="outsider")
    return {"h100": h100, "cluster": cluster}


def error(response, status: int = 400) -> dict:
    assert response.status_code == status, response.content
    return response.json()["error"]


@pytest.mark.parametrize(("url", "param", "known", "noun"), NAME_FILTERS, ids=IDS)
def test_an_unknown_name_is_a_400_naming_the_field(world, clients, url, param, known, noun):
    body = error(clients["owner"].get(url, {param: "bogus"}))
    assert body == {"code": "invalid", "message": f"{param}: No {noun} named 'bogus'.",
                    "fields": {param: [f"No {noun} named 'bogus'."]}}


@pytest.mark.parametrize(("url", "param", "known", "noun"), NAME_FILTERS, ids=IDS)
def test_a_known_name_still_filters(world, clients, url, param, known, noun):
    """The positive control: without it the test above could pass on a filter that refuses everything."""
    assert clients["owner"].get(url, {param: known}).status_code == 200
    assert clients["owner"].get(url, {param: ""}).status_code == 200  # an empty value means "no filter", as before


@pytest.mark.parametrize(("url", "param"), PROJECT_FILTERS, ids=[label(*f) for f in PROJECT_FILTERS])
def test_another_tenants_project_reads_like_a_missing_one(world, clients, url, param):
    theirs = error(clients["member"].get(url, {param: "secret"}))
    missing = error(clients["member"].get(url, {param: "no-such-project"}))
    assert theirs == {**missing, "message": missing["message"].replace("no-such-project", "secret"),
                      "fields": {param: ["No project named 'secret'."]}}
    assert clients["outsider"].get(url, {param: "secret"}).status_code == 200  # it exists: its own members see it


def test_another_tenants_organization_and_users_read_like_missing_ones(world, clients):
    assert error(clients["member"].get("/api/v1/projects/", {"organization": "globex"}))["fields"] == {
        "organization": ["No organization named 'globex'."]}
    assert error(clients["member"].get("/api/v1/memberships/", {"user": "outsider"}))["fields"] == {
        "user": ["No user named 'outsider'."]}


def test_staff_may_name_any_project(world, staff_client):
    for url, param in PROJECT_FILTERS:
        assert staff_client.get(url, {param: "secret"}).status_code == 200, url


def test_a_known_name_selects_only_its_rows(world, clients, tenant):
    h100_jobs = clients["member"].get("/api/v1/jobs/", {"flavor": "nvidia-h100-80gb"}).json()["results"]
    assert [job["project"] for job in h100_jobs] == ["vision"]  # the outsider's job stays out of sight
    a100 = ResourceFlavor.objects.create(name="nvidia-a100-40gb", vendor="nvidia", device_resource="nvidia.com/gpu")
    assert clients["member"].get("/api/v1/jobs/", {"flavor": a100.name}).json()["results"] == []
    quotas = clients["member"].get("/api/v1/quotas/", {"project": "vision"}).json()["results"]
    assert [(q["project"], q["flavor"]) for q in quotas] == [("vision", "nvidia-h100-80gb")]


def test_a_viewer_naming_a_project_without_audit_rights_gets_an_empty_page(world, clients):
    """The viewer knows vision exists (she is in it), so "no such project" would be wrong: she just sees no
    entries of its audit log."""
    response = clients["viewer"].get("/api/v1/audit/", {"project": "vision"})
    assert response.status_code == 200 and response.json()["results"] == []


@pytest.mark.parametrize("name", ["50%off", "it's", "a\"b", "x" * 500, "%(value)s", "ünï"])
def test_odd_names_are_quoted_back_not_a_500(world, clients, name):
    assert error(clients["member"].get("/api/v1/jobs/", {"flavor": name}))["fields"] == {
        "flavor": [f"No flavor named '{name}'."]}


DATE_FILTERS = [("/api/v1/jobs/", "submitted_after"), ("/api/v1/audit/", "since")]


@pytest.mark.parametrize(("url", "param"), DATE_FILTERS, ids=[label(*f) for f in DATE_FILTERS])
@pytest.mark.parametrize(("moment", "reason"), [
    ("2026-01-01T00:00:00+22:00", "offset must be between -12:00 and +14:00"),  # PostgreSQL: a 500
    ("2026-01-01T00:00:00-13:00", "offset must be between -12:00 and +14:00"),
    ("0001-01-01T00:00:00+01:00", "outside the years 1 to 9999"),  # SQLite: a 500
    ("9999-12-31T23:30:00-01:00", "outside the years 1 to 9999"),
    ("yesterday", "Enter a valid date/time."),
])
def test_a_moment_out_of_range_is_a_400_naming_the_field(world, clients, url, param, moment, reason):
    assert reason in error(clients["owner"].get(url, {param: moment}))["fields"][param][0]


@pytest.mark.parametrize(("url", "param"), DATE_FILTERS, ids=[label(*f) for f in DATE_FILTERS])
def test_a_moment_is_compared_in_utc(world, clients, tenant, url, param):
    from datetime import UTC, datetime, timedelta

    from tenancy.services import project_save

    project_save(actor=tenant.users["owner"], project=tenant.project, values={"description": "audited"})
    after = datetime.now(UTC) + timedelta(hours=1)
    for offset in ("+14:00", "-12:00", "Z"):
        hours = {"+14:00": 14, "-12:00": -12, "Z": 0}[offset]
        local = (after + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%S") + offset
        assert clients["owner"].get(url, {param: local}).json()["results"] == [], offset
    earlier = (after - timedelta(days=1) + timedelta(hours=14)).strftime("%Y-%m-%dT%H:%M:%S") + "+14:00"
    assert clients["owner"].get(url, {param: earlier}).json()["results"]


@pytest.mark.parametrize("param", ["job", "experiment"])
@pytest.mark.parametrize("value", ["99999999999999999999999", "1e30", "-1.5", "0"])
def test_an_id_that_cannot_be_one_is_a_400_naming_the_field(world, clients, param, value):
    """NumberFilter took these; SQLite cannot compare an integer past 64 bits (a 500)."""
    assert param in error(clients["member"].get("/api/v1/runs/", {param: value}))["fields"]
    assert clients["member"].get("/api/v1/runs/", {param: "1"}).status_code == 200


@pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/queue/", "/api/v1/projects/", "/api/v1/experiments/",
                                 "/api/v1/runs/", "/api/v1/quotas/", "/api/v1/budgets/", "/api/v1/tokens/"])
@pytest.mark.parametrize("ordering", ["nope", "-nope", "id,nope", "--id", "submitter__password"])
def test_ordering_by_an_unknown_field_is_a_400_naming_ordering_and_what_it_takes(clients, url, ordering):
    response = clients["member"].get(url, {"ordering": ordering})
    assert response.status_code == 400, (url, response.content)
    [reason] = response.json()["error"]["fields"]["ordering"]
    assert "Cannot order by" in reason and "use " in reason


@pytest.mark.parametrize(("url", "ordering"), [("/api/v1/jobs/", "-submitted_at,id"), ("/api/v1/projects/", "slug"),
                                               ("/api/v1/jobs/", "")])
def test_ordering_by_known_fields_works(clients, url, ordering):
    assert clients["member"].get(url, {"ordering": ordering}).status_code == 200


def test_the_order_asked_is_the_order_given(tenant, clients, world):
    submit(tenant, world["h100"], name="second")
    ids = [job["id"] for job in clients["member"].get("/api/v1/jobs/", {"ordering": "id"}).json()["results"]]
    assert len(ids) == 2
    assert [job["id"] for job in clients["member"].get("/api/v1/jobs/", {"ordering": "-id"}).json()["results"]] == (
        ids[::-1])


LISTS = [prefix for prefix, viewset, _ in router.registry if hasattr(viewset, "list")]


@pytest.mark.parametrize("prefix", LISTS)
def test_every_field_a_list_offers_to_order_by_orders_it(staff_client, prefix):
    """Defect (the API fuzz test): a list whose serializer computes its figures (pools: `series`, `headroom`)
    offered them to order by, as DRF does by default, and ordering by one was a 500. What a list offers (named by
    its 400) is what the database can order by."""
    url = f"/api/v1/{prefix}/"
    refused = staff_client.get(url, {"ordering": "nope"})
    assert refused.status_code == 400, (url, refused.content)
    [reason] = refused.json()["error"]["fields"]["ordering"]
    offered = reason.removeprefix("Cannot order by 'nope': use ").split(", each optionally")[0]
    for field in [] if offered == "nothing here" else offered.split(", "):
        for term in (field, f"-{field}"):
            assert staff_client.get(url, {"ordering": term}).status_code == 200, (url, term)
