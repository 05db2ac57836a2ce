"""Submission bodies over the parsers' limits are refused before any work, in the API's error shape (issue 14)."""

from __future__ import annotations

import json

import pytest

import core.parsers
from jobs.models import Job
from tests.core.test_parsers import laughs
from tests.jobs.conftest import api_body

YAML_JOB = """project: vision
name: yaml-job
image: ghcr.io/acme/train:1
command: [python, train.py]
groups: [{replicas: 1, devices: 8, flavor: nvidia-h100-80gb}]
"""


@pytest.fixture(autouse=True)
def _inventory(inventory):
    return inventory


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    return response.json()["error"]


def post_yaml(client, text: str):
    return client.post("/api/v1/jobs/", text, content_type="application/yaml")


def test_nested_aliases_under_launcher_options_are_refused_at_once(tenant, clients):
    """420 bytes that took 7.7 s and stored 39 MB: the composer stops at the alias limit, before expanding them."""
    options = "\n".join("  " + line for line in laughs().splitlines())
    error = error_of(post_yaml(clients["member"], YAML_JOB + "launcher_options:\n" + options + "\n"), 400)
    assert error["code"] == "parse_error" and "aliases repeat" in error["message"]
    assert not Job.objects.exists()


def test_a_yaml_body_over_its_limit_is_a_413_without_parsing_it(tenant, clients, monkeypatch):
    parsed = []
    monkeypatch.setattr(core.parsers, "load_yaml", parsed.append)
    body = YAML_JOB + "# " + "x" * 10_000_000 + "\n"
    error = error_of(post_yaml(clients["member"], body), 413)
    assert parsed == []
    assert error["code"] == "too_large" and "200,000 bytes" in error["message"]


def test_a_json_body_over_the_upload_limit_is_a_413(tenant, clients, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = json.dumps(api_body(env={"PAD": "x" * 20_000}))
    error = error_of(clients["member"].post("/api/v1/jobs/", body, content_type="application/json"), 413)
    assert error["code"] == "too_large" and "10,000 bytes" in error["message"]


@pytest.mark.parametrize(("body", "content_type", "words"), [
    ("a: " + "[" * 5_000 + "]" * 5_000, "application/yaml", "nested more than 32 levels"),
    ("[" * 100_000, "application/json", "nested more than 32 levels"),
    (YAML_JOB + "launcher_options: {seed: " + "7" * 5_000 + "}\n", "application/yaml", "integer is longer"),
    (json.dumps(api_body())[:-1] + ', "launcher_options": {"seed": ' + "7" * 5_000 + "}}", "application/json",
     "integer is longer"),
    (YAML_JOB + "launcher_options: &o {again: *o}\n", "application/yaml", "inside the node it names"),
    (YAML_JOB + 'launcher_options: {note: "a\\0b"}\n', "application/yaml", "NUL"),
    (json.dumps(api_body(launcher_options={"note": "a\x00b"})), "application/json", "NUL"),
    (json.dumps(api_body(project="vi\x00sion")), "application/json", "NUL"),
])
def test_bodies_over_the_limits_are_400s_not_500s(tenant, clients, body, content_type, words):
    error = error_of(clients["member"].post("/api/v1/jobs/", body, content_type=content_type), 400)
    assert error["code"] == "parse_error" and words in error["message"], error
    assert not Job.objects.exists()


def test_yaml_holds_jsons_values_so_a_date_stays_a_string(tenant, clients):
    response = post_yaml(clients["member"], YAML_JOB + "launcher_options: {since: 2026-01-01}\n")
    assert response.status_code == 201, response.content
    assert Job.objects.get().launcher_options == {"since": "2026-01-01"}


def test_anchors_and_merge_keys_within_the_limits_still_work(tenant, clients):
    document = YAML_JOB.replace(
        "groups: [{replicas: 1, devices: 8, flavor: nvidia-h100-80gb}]",
        "groups:\n  - &g {role: a, replicas: 1, devices: 8, flavor: nvidia-h100-80gb}\n  - {<<: *g, role: b}")
    response = post_yaml(clients["member"], document)
    assert response.status_code == 201, response.content
    assert [g["role"] for g in response.json()["groups"]] == ["a", "b"]


def nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"in": value}
    return value


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"launcher_options": {"blob": "x" * 70_000}}, "launcher_options", "At most 65,536 bytes"),
    ({"launcher_options": {"deep": nested(10)}}, "launcher_options", "Nested more than 10 levels"),
    ({"env": {f"V{i}": "x" * 30_000 for i in range(3)}}, "env", "At most 65,536 bytes"),
])
def test_free_form_fields_are_bounded_and_the_400_names_the_field(tenant, clients, change, field, words):
    error = error_of(clients["member"].post("/api/v1/jobs/", {**api_body(), **change}, format="json"), 400)
    assert any(words in reason for reason in error["fields"][field]), error
    assert not Job.objects.exists()


def test_a_number_json_cannot_hold_is_a_400_not_a_500(tenant, clients):
    """1e999 parses to infinity, which neither SQLite's JSON check nor PostgreSQL's jsonb stores."""
    body = json.dumps(api_body())[:-1] + ', "launcher_options": {"lr": 1e999}}'
    error = error_of(clients["member"].post("/api/v1/jobs/", body, content_type="application/json"), 400)
    assert "finite" in error["fields"]["launcher_options"][0]
    assert not Job.objects.exists()


def test_free_form_fields_within_the_bounds_are_kept(tenant, clients):
    options = {"deep": nested(9), "blob": "x" * 60_000}  # ten levels with the options themselves
    response = clients["member"].post("/api/v1/jobs/", api_body(launcher_options=options), format="json")
    assert response.status_code == 201, response.content
    assert Job.objects.get().launcher_options == options
