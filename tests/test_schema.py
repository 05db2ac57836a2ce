"""The OpenAPI schema of every endpoint generates and validates with no warning (a new endpoint that drf-spectacular
cannot describe fails here, not in a user's client generator)."""

from django.core.management import call_command


def test_the_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    text = (tmp_path / "schema.yaml").read_text()
    assert "/api/v1/runs/{id}/series/" in text and "/api/v1/runs/{id}/log-batch/" in text
    assert "runToken" in text and "/mlflow/" not in text.split("paths:", 1)[1]


def test_every_operation_documents_its_refusals_with_the_error_body():
    """core.openapi: clients (and tests/fuzz/) learn from the schema that refusals are `{"error": ...}` 4xx."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(public=True)
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    assert schema["components"]["schemas"]["Error"]["required"] == ["error"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for status in ("401", "403", "429"):
                assert operation["responses"][status]["content"] == error, (method, path, status)
    jobs, me = schema["paths"]["/api/v1/jobs/"], schema["paths"]["/api/v1/me/"]["get"]
    assert {"400", "409"} <= set(jobs["post"]["responses"]) and "409" not in jobs["get"]["responses"]
    assert "404" in jobs["get"]["responses"]  # a page past the last
    assert not {"400", "404", "409"} & set(me["responses"])
    assert "404" in schema["paths"]["/api/v1/jobs/{id}/"]["get"]["responses"]
