"""The OpenAPI schema of every endpoint generates and validates with no warning (a new endpoint that drf-spectacular
cannot describe fails here, not in a user's client generator)."""

from django.core.management import call_command


def test_the_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    text = (tmp_path / "schema.yaml").read_text()
    assert "/api/v1/runs/{id}/series/" in text and "/api/v1/runs/{id}/log-batch/" in text
    assert "runToken" in text and "/mlflow/" not in text.split("paths:", 1)[1]


def nulls_the_schema_forbids(value, schema: dict, components: dict, path: str = "") -> list[str]:
    """Paths in `value` that are null where `schema` (OpenAPI 3.0, drf-spectacular's forms) does not say nullable,
    or missing where it says required."""
    while "$ref" in schema or ("allOf" in schema and len(schema["allOf"]) == 1):
        nullable = schema.get("nullable", False)
        schema = schema["allOf"][0] if "allOf" in schema else schema
        if "$ref" in schema:
            schema = components[schema["$ref"].rsplit("/", 1)[1]]
        schema = {**schema, "nullable": nullable or schema.get("nullable", False)}
    if value is None:
        return [] if schema.get("nullable") else [path or "(the body)"]
    found = []
    if isinstance(value, dict):
        found += [f"{path}.{key} (missing)" for key in schema.get("required", []) if key not in value]
        for key, item in value.items():
            if key in schema.get("properties", {}):
                found += nulls_the_schema_forbids(item, schema["properties"][key], components, f"{path}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += nulls_the_schema_forbids(item, schema["items"], components, f"{path}[{index}]")
    return found


def test_job_answers_are_null_only_where_the_schema_says_so(tenant, clients, tmp_path):
    """A queued or cancelled job has no attempt, so its cluster, times and placement are null: the schema must say
    they may be (a client generated from it would fail on them otherwise)."""
    import yaml

    from clusters.models import Cluster, Node
    from quotas.models import Quota, ResourceFlavor
    from tests.jobs.conftest import api_body

    flavor = ResourceFlavor.objects.create(name="nvidia-h100-80gb", vendor="nvidia", device_resource="nvidia.com/gpu")
    Node.objects.create(cluster=Cluster.objects.create(name="sim"), name="n1", flavor=flavor, devices=8, position=1)
    Quota.objects.create(project=tenant.project, flavor=flavor, guaranteed=8, borrow_limit=0)
    call_command("spectacular", "--file", str(tmp_path / "schema.yaml"))
    schema = yaml.safe_load((tmp_path / "schema.yaml").read_text())
    components = schema["components"]["schemas"]

    def check(method: str, path: str, operation_path: str, status: int, **kwargs) -> None:
        response = getattr(clients["owner"], method)(path, format="json", **kwargs)
        assert response.status_code == status, response.content
        declared = schema["paths"][operation_path][method]["responses"][str(status)]
        body_schema = declared["content"]["application/json"]["schema"]
        assert nulls_the_schema_forbids(response.json(), body_schema, components) == [], (method, path)

    job = clients["owner"].post("/api/v1/jobs/", api_body(), format="json")
    check("post", "/api/v1/jobs/", "/api/v1/jobs/", 201, data=api_body(name="another"))
    job_id = job.json()["id"]
    assert job.json().get("cluster", "missing") is None
    check("get", "/api/v1/jobs/", "/api/v1/jobs/", 200)
    check("get", "/api/v1/queue/", "/api/v1/queue/", 200)
    check("get", f"/api/v1/jobs/{job_id}/", "/api/v1/jobs/{id}/", 200)
    check("post", f"/api/v1/jobs/{job_id}/cancel/", "/api/v1/jobs/{id}/cancel/", 200)
    check("post", f"/api/v1/jobs/{job_id}/resubmit/", "/api/v1/jobs/{id}/resubmit/", 201)
def test_every_operation_documents_its_refusals_with_the_error_body():
    """core.openapi: clients (and tests/fuzz/) learn from the schema that refusals are `{"error": ...}` 4xx."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(public=True)
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    assert schema["components"]["schemas"]["Error"]["required"] == ["error"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            # 413 and 414 too (the API fuzz test's coverage cases, oversized, got them undocumented).
            for status in ("401", "403", "429", "414", *(("413",) if "requestBody" in operation else ())):
                assert operation["responses"][status]["content"] == error, (method, path, status)
    jobs, me = schema["paths"]["/api/v1/jobs/"], schema["paths"]["/api/v1/me/"]["get"]
    assert {"400", "409"} <= set(jobs["post"]["responses"]) and "409" not in jobs["get"]["responses"]
    assert "404" in jobs["get"]["responses"]  # a page past the last
    assert not {"400", "404", "409"} & set(me["responses"])
    assert "404" in schema["paths"]["/api/v1/jobs/{id}/"]["get"]["responses"]
