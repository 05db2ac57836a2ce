"""MLflow's endpoints under hostile requests. They are not in the OpenAPI schema (their shapes are MLflow's), so
Schemathesis never reaches them: this test describes them itself (ROUTES: each endpoint's method and fields, by
kind) and generates requests with Hypothesis, as a project owner, a viewer, an outsider of another organization and
a job's run token, over the fuzz world's objects of both tenants (tests/fuzz/conftest.py).

Strings are hostile (lone surrogates, quotes and wildcards, 70,000 characters, digits of other scripts, numbers
past 64 bits), fields come missing or of the wrong type, filters and sort terms are built from MLflow's grammar with
hostile parts, bodies are sometimes no JSON at all, and both `api/` and `ajax-api/` paths are called. Every answer
must be JSON: a 2xx object, or MLflow's `{"error_code", "message"}` with the status MLflow gives that code; never a
5xx, and never a trace of the other tenant (its marker; less what the request itself sent).

First, for the owner, each field of each endpoint is set in turn to each hostile value of its kind, the others
valid (`explicit_cases`); then TIDAL_FUZZ_EXAMPLES (default 5; `make fuzz` 100) generated requests per endpoint
and role. A failure lists every endpoint that failed, with the request and the server's traceback.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.fuzz.conftest import EXPLORE, MARKERS
from tests.fuzz.test_api_fuzz import in_process_requests, strings_in
from tracking.mlflow.errors import STATUS
from tracking.tokens import run_token

EXAMPLES = int(os.environ.get("TIDAL_FUZZ_EXAMPLES", "5"))
TENANT_OF = {"owner": "vision", "viewer": "vision", "outsider": "secret", "job": "vision"}

# ------------------------------------------------------------------------------------------- the routes, by kind

ROUTES: dict[str, tuple[str, dict[str, str]]] = {
    "experiments/get-by-name": ("GET", {"experiment_name": "text"}),
    "experiments/get": ("GET", {"experiment_id": "experiment_id"}),
    "experiments/create": ("POST", {"name": "text", "artifact_location": "text", "tags": "pairs"}),
    "runs/create": ("POST", {"experiment_id": "experiment_id", "run_name": "text", "start_time": "int",
                             "tags": "pairs", "user_id": "text"}),
    "runs/get": ("GET", {"run_id": "run_id", "run_uuid": "run_id"}),
    "runs/update": ("POST", {"run_id": "run_id", "status": "status", "end_time": "int", "run_name": "text"}),
    "runs/search": ("POST", {"experiment_ids": "experiment_ids", "filter": "filter", "order_by": "order_by",
                             "max_results": "int", "page_token": "page_token", "run_view_type": "view_type"}),
    "runs/log-batch": ("POST", {"run_id": "run_id", "metrics": "metrics", "params": "pairs", "tags": "pairs"}),
    "runs/log-metric": ("POST", {"run_id": "run_id", "key": "key", "value": "number", "step": "int",
                                 "timestamp": "int", "model_id": "text"}),
    "runs/log-parameter": ("POST", {"run_id": "run_id", "key": "key", "value": "text"}),
    "runs/set-tag": ("POST", {"run_id": "run_id", "key": "key", "value": "text"}),
    "metrics/get-history": ("GET", {"run_id": "run_id", "metric_key": "key", "max_results": "int",
                                    "page_token": "page_token"}),
    "metrics/get-history-bulk-interval": ("GET", {"run_ids": "run_ids", "metric_key": "key", "max_results": "int",
                                                  "start_step": "int", "end_step": "int"}),
    "logged-models": ("POST", {"experiment_id": "experiment_id", "source_run_id": "run_id", "name": "text",
                               "model_type": "text", "params": "pairs", "tags": "pairs"}),
    "logged-models/search": ("POST", {"experiment_ids": "experiment_ids", "filter": "filter", "max_results": "int",
                                      "page_token": "page_token"}),
    "runs/outputs": ("POST", {"run_id": "run_id", "models": "pairs"}),
    "no/such-endpoint": ("POST", {"run_id": "run_id"}),
}

# ------------------------------------------------------------------------------------------------ hostile values

HOSTILE_TEXT = ["", " ", "\ud800", "lo\udfffss", "\ud83d", "\x00", "\x1b[31m", "'", '"', "`", "\\", "%", "_",
                "' OR '1'='1", "a" * 251, "x" * 70_000, "0", "-1", "9" * 40, "1e999", "NaN", "-Infinity", "²", "١٢",
                "\u202eevil", "../../etc/passwd", "params.a = 'b'", "\U0001f4a5", "\u0085", "Default"]
HOSTILE_INTS = [0, -1, 1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, 10**400, 1.5, -0.0, True, None,
                "12", "-5", "1e3", "", "²", "9" * 40]
HOSTILE_NUMBERS = [0.0, -1e308, 1e308, 5e-324, "NaN", "Infinity", "-Infinity", "nan", "high", 10**400, True, None]
KEYS = ["loss", "learning_rate", "in", "like", "status", "run_name", "run_id", "start_time", "end_time",
        "mlflow.runName", "`a b`", '"q"', "`\ud800`", "a.b/c:d-e", "`", "", "x" * 300]
ENTITIES = ["metrics", "params", "tags", "attributes", "attr", "run", "metric", "bogus", "", "METRICS"]
OPS = ["=", "!=", "<", "<=", ">", ">=", "LIKE", "ILIKE", "IN", "NOT IN", "not  in", "~", "==", "like"]
VALUES = ["'a'", '"b"', "('x', 'y')", "()", "('a,b', 'c')", "1", "-1e999", "nan", "'%a%b%'", "'\\''", "1" * 40,
          "'\ud800'", "('\ud800')", "'_'", "(1, 2)", "''"]


def hostile_text() -> st.SearchStrategy:
    alphabet = st.one_of(st.characters(), st.characters(categories=["Cs"]), st.sampled_from("'\"`\\%_()., "))
    return st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(alphabet, max_size=40))


def page_token_of(payload: Any) -> str:
    return base64.b64encode(json.dumps(payload).encode()).decode()


def clause() -> st.SearchStrategy:
    return st.builds(lambda e, k, o, v: f"{e}.{k} {o} {v}", st.sampled_from(ENTITIES),
                     st.one_of(st.sampled_from(KEYS), hostile_text()), st.sampled_from(OPS),
                     st.one_of(st.sampled_from(VALUES), hostile_text()))


def order_term() -> st.SearchStrategy:
    return st.builds(lambda e, k, d: f"{e}.{k} {d}".strip(), st.sampled_from(ENTITIES),
                     st.one_of(st.sampled_from(KEYS), hostile_text()),
                     st.sampled_from(["", "ASC", "DESC", "desc", "UP"]))


def kinds(world_refs: dict[str, list[str]]) -> dict[str, st.SearchStrategy]:
    """A strategy per kind of field: valid values (naming objects of both tenants) and hostile ones."""
    text = hostile_text()
    ints = st.one_of(st.sampled_from(HOSTILE_INTS), st.integers())
    run_id = st.one_of(st.sampled_from(world_refs["run"]), text)
    experiment_id = st.one_of(st.sampled_from(world_refs["experiment"] + ["0"]), text)
    pair = st.fixed_dictionaries({"key": st.one_of(st.sampled_from(KEYS), text), "value": st.one_of(text, ints)})
    point = st.fixed_dictionaries({"key": st.one_of(st.sampled_from(KEYS), text)},
                                  optional={"value": st.sampled_from(HOSTILE_NUMBERS), "step": ints,
                                            "timestamp": ints, "dataset_name": text, "colour": text})
    return {
        "text": text,
        "key": st.one_of(st.sampled_from(KEYS), text),
        "int": ints,
        "number": st.one_of(st.sampled_from(HOSTILE_NUMBERS), st.floats()),
        "run_id": run_id,
        "run_ids": st.lists(run_id, max_size=4),
        "experiment_id": experiment_id,
        "experiment_ids": st.lists(experiment_id, max_size=4),
        "status": st.one_of(st.sampled_from(["RUNNING", "FINISHED", "FAILED", "KILLED", "running", "DONE"]), text),
        "view_type": st.sampled_from(["ACTIVE_ONLY", "DELETED_ONLY", "ALL", 2, "bogus", None]),
        "filter": st.one_of(st.lists(clause(), max_size=4).map(" AND ".join),
                            st.lists(clause(), max_size=3).map(" OR ".join), text),
        "order_by": st.lists(st.one_of(order_term(), text), max_size=4),
        "page_token": st.one_of(text, st.builds(page_token_of, st.fixed_dictionaries(
            {}, optional={"offset": st.sampled_from(HOSTILE_INTS), "step": st.sampled_from(HOSTILE_INTS)}))),
        "pairs": st.one_of(st.lists(pair, max_size=3), st.dictionaries(text, text, max_size=3), text),
        "metrics": st.one_of(st.lists(point, max_size=4), text, ints),
    }


def wrong_type() -> st.SearchStrategy:
    return st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.lists(st.integers(), max_size=2),
                     st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


# ------------------------------------------------------------------------------------------------------ requests

@dataclass
class Request:
    endpoint: str
    fields: dict[str, Any]
    project: str = "vision"
    prefix: str = "api"
    raw: str | None = None  # a body sent as it is (POST), instead of the fields as JSON
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def method(self) -> str:
        return ROUTES[self.endpoint][0]

    @property
    def path(self) -> str:
        return f"/mlflow/{self.project}/{self.prefix}/2.0/mlflow/{self.endpoint}"

    def send(self, client: Client, headers: dict[str, str]):
        values = {**self.fields, **self.extra}
        if self.method == "GET":
            # A query string holds bytes: a lone surrogate goes as its UTF-8-ish bytes, which the server decodes.
            pairs = [(k, _query_value(v)) for k, v in values.items()]
            query = urlencode(pairs, doseq=True, encoding="utf-8", errors="surrogatepass")
            return client.get(f"{self.path}?{query}", headers=headers)
        body = self.raw if self.raw is not None else json.dumps(values)
        return client.post(self.path, body, content_type="application/json", headers=headers)

    def describe(self) -> str:
        shown = self.raw if self.raw is not None else json.dumps({**self.fields, **self.extra})
        return f"{self.method} {self.path} {shown[:400]}"


def _query_value(value: Any) -> Any:
    if isinstance(value, list):
        return [v if isinstance(v, str) else json.dumps(v) for v in value]
    return value if isinstance(value, str) else json.dumps(value)


def valid_fields(endpoint: str, refs: dict[str, list[str]]) -> dict[str, Any]:
    """Fields that name the owner's objects, for the explicit cases to vary one at a time."""
    defaults = {"text": "fuzz", "key": "loss", "int": 1, "number": 0.5, "run_id": refs["own_run"],
                "run_ids": [refs["own_run"]], "experiment_id": refs["own_experiment"],
                "experiment_ids": [refs["own_experiment"]], "status": "RUNNING", "view_type": "ACTIVE_ONLY",
                "filter": "metrics.loss < 1", "order_by": ["metrics.loss DESC"], "page_token": "",
                "pairs": [{"key": "k", "value": "v"}], "metrics": [{"key": "loss", "value": 0.5, "step": 1,
                                                                    "timestamp": 1}]}
    return {name: defaults[kind] for name, kind in ROUTES[endpoint][1].items()}


HOSTILE_OF_KIND: dict[str, list[Any]] = {
    "text": HOSTILE_TEXT, "key": HOSTILE_TEXT + KEYS, "int": HOSTILE_INTS, "number": HOSTILE_NUMBERS,
    "run_id": HOSTILE_TEXT, "experiment_id": HOSTILE_TEXT,
    "run_ids": [[t] for t in HOSTILE_TEXT] + [[], [str(i) for i in range(101)]],
    "experiment_ids": [[t] for t in HOSTILE_TEXT], "status": HOSTILE_TEXT,
    "view_type": ["DELETED_ONLY", 2, "bogus", None],
    "filter": HOSTILE_TEXT + [f"{e}.{k} {o} {v}" for e, k, o, v in zip(
        ENTITIES * 2, KEYS, OPS + OPS, VALUES, strict=False)] + [
        " AND ".join(f"params.p{i} = 'x'" for i in range(3_000)),
        "params.a IN (" + ", ".join(f"'{i}'" for i in range(40_000)) + ")"],
    "order_by": [[t] for t in HOSTILE_TEXT] + [[f"metrics.m{i}" for i in range(2_000)],
                                                ["metrics.a", "metrics.a"]],
    "page_token": HOSTILE_TEXT + [page_token_of({"offset": v}) for v in HOSTILE_INTS]
    + [page_token_of({"step": v}) for v in HOSTILE_INTS] + [page_token_of([1]), page_token_of("x")],
    "pairs": [[{"key": t, "value": t}] for t in HOSTILE_TEXT] + [{t: t} for t in HOSTILE_TEXT] + [
        [{"key": "k"}], [{"value": "v"}], [[1]], [{"key": "k", "value": {"nested": 1}}]],
    "metrics": [[{"key": t, "value": 1.0, "step": 1}] for t in HOSTILE_TEXT]
    + [[{"key": "loss", "value": v, "step": 1}] for v in HOSTILE_NUMBERS]
    + [[{"key": "loss", "value": 1.0, "step": v, "timestamp": v}] for v in HOSTILE_INTS] + [[1], [None], {}],
}


def explicit_cases(refs: dict[str, list[str]]) -> Iterator[Request]:
    """Every endpoint with each of its fields set in turn to each hostile value of its kind (the others valid),
    missing, and of a wrong type; then bodies that are no JSON object, other projects' paths and ajax-api."""
    for endpoint, (method, fields) in ROUTES.items():
        valid = valid_fields(endpoint, refs)
        yield Request(endpoint, valid)
        yield Request(endpoint, valid, prefix="ajax-api")
        for name, kind in fields.items():
            for value in [*HOSTILE_OF_KIND[kind], None, {"a": 1}, [1, 2], 3.5]:
                yield Request(endpoint, {**valid, name: value})
            yield Request(endpoint, {k: v for k, v in valid.items() if k != name})
        if method == "POST":
            for raw in ["", "{", "[1, 2]", "null", '"text"', '{"a": NaN}', "\xff\xfe", '{"run_id": "\\ud800"}',
                        "[" * 5_000]:
                yield Request(endpoint, {}, raw=raw)
        yield Request(endpoint, valid, project="secret")
        yield Request(endpoint, valid, project="no-such-project")


def generated(endpoint: str, strategies: dict[str, st.SearchStrategy], refs: dict[str, list[str]]
              ) -> st.SearchStrategy:
    fields = ROUTES[endpoint][1]
    value_of = {name: st.one_of(strategies[kind], wrong_type()) for name, kind in fields.items()}
    return st.builds(
        Request, st.just(endpoint), st.fixed_dictionaries({}, optional=value_of),
        project=st.sampled_from(["vision", "secret", "vision", "nope"]),
        prefix=st.sampled_from(["api", "ajax-api"]),
        raw=st.one_of(st.none(), st.none(), st.none(), st.text(max_size=30)) if ROUTES[endpoint][0] == "POST"
        else st.none(),
        extra=st.dictionaries(st.sampled_from(["unknown", "run_uuid", "experiment_id"]), hostile_text(), max_size=1))


# ------------------------------------------------------------------------------------------------------- checks

def problems(response, request: Request, forbidden: str) -> list[str]:
    found = []
    if response.status_code >= 500:
        found.append(f"a server error ({response.status_code})")
    if not response.get("Content-Type", "").startswith("application/json"):
        return [*found, f"not JSON: {response.get('Content-Type')} {response.content[:200]!r}"]
    body = response.json()
    if response.status_code >= 400:
        if not isinstance(body, dict) or set(body) != {"error_code", "message"}:
            found.append(f"not MLflow's error body: {body!r:.200}")
        elif STATUS.get(body["error_code"]) != response.status_code and not (
                body["error_code"] in ("BAD_REQUEST", "INVALID_PARAMETER_VALUE") and response.status_code in (
                405, 413, 414)):
            found.append(f"{body['error_code']} with status {response.status_code}")
    elif not isinstance(body, dict):
        found.append(f"a 2xx that is no JSON object: {body!r:.200}")
    text = response.content.decode()
    for sent in strings_in([request.fields, request.extra, request.raw or ""]):
        if forbidden in sent:
            text = text.replace(sent, "")
    if forbidden in text:
        found.append(f"the other tenant's marker {forbidden!r} is in the response")
    return found


@dataclass
class Caller:
    client: Client
    headers: dict[str, str]
    forbidden: str
    tracebacks: list[str]
    failed: list[str] = field(default_factory=list)

    def check(self, request: Request) -> bool:
        del self.tracebacks[:]
        with transaction.atomic():
            response = request.send(self.client, self.headers)
            transaction.set_rollback(True)
        found = problems(response, request, self.forbidden)
        if found:
            self.failed.append(f"{request.describe()}\n-> {response.status_code} {response.content[:300]!r}\n"
                               f"{'; '.join(found)}\n{''.join(self.tracebacks)}")
        return not found


@pytest.fixture
def refs(world) -> dict[str, Any]:
    from tracking.models import Experiment, Run

    own = Run.objects.filter(project__slug="vision", job__isnull=True).first()
    job_run = Run.objects.filter(project__slug="vision", job__isnull=False).first()
    return {"run": [str(pk) for pk in Run.objects.values_list("pk", flat=True)] + ["0", "999999"],
            "experiment": [str(pk) for pk in Experiment.objects.values_list("pk", flat=True)],
            "own_run": str(own.pk), "own_experiment": str(own.experiment_id), "job_run": job_run}


def headers_of(role: str, world, refs) -> dict[str, str]:
    job_run = refs["job_run"]
    secret = run_token(job_run.pk, job_run.job.current_attempt.number) if role == "job" else world.secrets[role]
    return {"Authorization": f"Bearer {secret}"}


def test_every_hostile_value_in_every_field_answers_mlflows_json_as_the_owner(world, refs, no_throttling):
    forbidden = MARKERS["secret"]
    with in_process_requests() as tracebacks:
        caller = Caller(Client(raise_request_exception=False), headers_of("owner", world, refs), forbidden,
                        tracebacks)
        count = sum(1 for request in explicit_cases(refs) if caller.check(request) or True)
    assert count > 1_000
    if caller.failed:
        pytest.fail(f"{len(caller.failed)} requests failed:\n" + "\n".join(caller.failed[:30]), pytrace=False)


@pytest.mark.parametrize("role", ["owner", "viewer", "outsider", "job"])
def test_generated_requests_answer_mlflows_json_without_the_other_tenants_data(role, world, refs, no_throttling):
    forbidden = next(marker for slug, marker in MARKERS.items() if slug != TENANT_OF[role])
    strategies = kinds(refs)
    failed = []
    with in_process_requests() as tracebacks:
        caller = Caller(Client(raise_request_exception=False), headers_of(role, world, refs), forbidden, tracebacks)
        for endpoint in ROUTES:

            @hypothesis_settings(max_examples=EXAMPLES, deadline=None, derandomize=not EXPLORE, database=None,
                                 phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False,
                                 suppress_health_check=list(HealthCheck))
            @given(request=generated(endpoint, strategies, refs))
            def examples(request: Request) -> None:
                assert caller.check(request)

            try:
                examples()
            except AssertionError:
                failed.append(f"== {endpoint} as {role}\n{caller.failed[-1]}")
    if failed:
        pytest.fail(f"{len(failed)} endpoints failed:\n" + "\n".join(failed), pytrace=False)
