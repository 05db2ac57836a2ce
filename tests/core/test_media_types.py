"""A body the endpoint does not read is a 415 that says what it reads, and the schema documents it (make fuzz,
exploring, got an undocumented 415 from a multipart body, whose message named the media type as "")."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator

from jobs.models import Job


def refusal(response) -> str:
    assert response.status_code == 415, response.content
    error = response.json()["error"]
    assert error["code"] == "unsupported_media_type" and error["fields"] == {}
    return error["message"]


@pytest.mark.parametrize("content_type", ["multipart/form-data; boundary=xyz", "text/csv"])
def test_a_body_of_a_type_the_endpoint_does_not_read_names_the_types_it_reads(tenant, clients, content_type):
    message = refusal(clients["member"].generic("POST", "/api/v1/jobs/", b"--xyz--\r\n", content_type=content_type))
    assert content_type.split(";")[0] in message and "application/json" in message and "application/yaml" in message
    assert "boundary" not in message
    assert not Job.objects.exists()


def test_a_body_without_a_content_type_says_so(tenant, clients):
    """DRF's own message was 'Unsupported media type "" in request.'."""
    message = refusal(clients["member"].generic("POST", "/api/v1/jobs/", b'{"name": "x"}', content_type=""))
    assert "no Content-Type" in message and "application/json" in message
    assert not Job.objects.exists()


def test_every_operation_with_a_body_documents_the_415():
    schema = SchemaGenerator().get_schema(public=True)
    with_body = [(path, method, operation) for path, operations in schema["paths"].items()
                 for method, operation in operations.items() if "requestBody" in operation]
    assert with_body
    for path, method, operation in with_body:
        assert "415" in operation["responses"], (method, path)
    assert "415" not in schema["paths"]["/api/v1/jobs/"]["get"]["responses"]
