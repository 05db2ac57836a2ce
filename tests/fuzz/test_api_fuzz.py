"""Schemathesis against the API's own OpenAPI schema (`/api/schema/`): every operation, as a project owner, a viewer
and an outsider of another organization, each with their own Bearer token, over a world holding objects of every
kind in both tenants (tests/fuzz/conftest.py).

Each example must answer without a server error, with a status code, content type and body the schema documents,
and without a trace of the other tenant (its marker; less what the request itself named). Examples are generated
invalid and valid (schemathesis' negative and positive modes), and valid ones also name existing objects of both
tenants: in the path, and in the filters and body fields that name one (`project`, `flavor`, `run`, ...). Each
example runs in a savepoint rolled back after it, so every one starts from the same world (an owner deleting their
project or revoking their own token does not blind the examples after it).

`make test` runs TIDAL_FUZZ_EXAMPLES (default 5) examples per operation and role, derandomized; `make fuzz` runs
100 and, first, schemathesis' coverage cases (TIDAL_FUZZ_COVERAGE=1). A failure lists every operation that failed,
with a curl command that repeats it and the server's traceback.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import got_request_exception, request_finished, request_started
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.fuzz.conftest import EXPLORE, MARKERS

EXAMPLES = int(os.environ.get("TIDAL_FUZZ_EXAMPLES", "5"))
COVERAGE = os.environ.get("TIDAL_FUZZ_COVERAGE", "") == "1"  # `make fuzz`: some 8,000 more requests per role
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# Whose data each role may see: its own tenant's; the other tenant's marker must never reach it.
TENANT_OF = {"owner": "vision", "viewer": "vision", "outsider": "secret"}


@contextmanager
def in_process_requests() -> Iterator[list[str]]:
    """Requests into Django's WSGI handler inside the test's transaction, as Django's test client sends them: the
    handler would close the connection (and with it the test's transaction) at each request's start and end.
    Yields the tracebacks of the exceptions the views raised."""
    tracebacks: list[str] = []

    def record(sender, request=None, **kwargs) -> None:
        tracebacks.append(traceback.format_exc())

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    got_request_exception.connect(record)
    try:
        yield tracebacks
    finally:
        got_request_exception.disconnect(record)
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def strategy_for(operation, world) -> st.SearchStrategy:
    """Invalid cases; valid ones; and valid ones naming existing objects of both tenants, in their path or in the
    filters and body fields that name one (`project`, `flavor`, `experiment`, ...)."""
    prefix = operation.path.split("{", 1)[0]
    known = world.path_parameters.get(prefix, []) if "{" in operation.path else []
    references = st.fixed_dictionaries({name: st.sampled_from(values)
                                        for name, values in world.references.items() if values})
    valid = [operation.as_strategy(GenerationMode.POSITIVE),
             *(operation.as_strategy(GenerationMode.POSITIVE, path_parameters=p) for p in known)]
    return st.one_of(operation.as_strategy(GenerationMode.NEGATIVE), *valid,
                     *(st.builds(naming_existing_objects, strategy, references) for strategy in valid))


def naming_existing_objects(case, references: dict[str, str | int]):
    """The case with every query parameter and body field that names an object (of the same type) replaced."""
    case.query = replaced(case.query, references)
    case.body = replaced(case.body, references)
    return case


def replaced(value, references: dict[str, str | int]):
    if isinstance(value, list):
        return [replaced(item, references) for item in value]
    if not isinstance(value, dict):
        return value
    return {key: references[key] if key in references and type(item) is type(references[key])
            else replaced(item, references) for key, item in value.items()}


def failures_of(operation, strategy, *, headers: dict[str, str], forbidden: str,
                tracebacks: list[str]) -> str | None:
    """Run the examples of one operation; the first failure, described, or None."""
    found: list[str] = []

    def check(case) -> None:
        del tracebacks[:]
        with transaction.atomic():
            response = case.call(headers=headers)
            transaction.set_rollback(True)
        try:
            case.validate_response(response, checks=CHECKS)
            leaked = without_echoes(response.text, case, forbidden)
            assert forbidden not in leaked, f"the other tenant's marker {forbidden!r} is in the response"
        except BaseException as error:
            found.append(f"{case.as_curl_command(headers=headers)}\n-> {response.status_code} "
                         f"{response.text[:300]}\n{error}\n{''.join(tracebacks)}")
            raise

    @hypothesis_settings(max_examples=EXAMPLES, deadline=None, derandomize=not EXPLORE, database=None,
                         phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False,
                         suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def examples(case) -> None:
        check(case)

    try:
        for case in coverage_cases(operation) if COVERAGE else ():
            check(case)
        examples()
    except BaseException:
        if not found:
            raise
        return found[-1]
    return None


def coverage_cases(operation) -> Iterator:
    """Schemathesis' coverage phase: deterministic cases at the edges of the schema (boundary values, each field
    missing, of the wrong type, null...), valid and invalid. About 70 per operation."""
    from schemathesis.generation.drivers import CoverageGenerator
    from schemathesis.generation.feedback import FeedbackSources
    from schemathesis.generation.hypothesis.builder import Override

    generation = operation.schema.config.generation_for(operation=operation, phase="coverage")
    yield from CoverageGenerator(operation=operation, generation_modes=list(GenerationMode),
                                 generation_config=generation, auth_storage=None, override=Override(),
                                 feedback=FeedbackSources())


def without_echoes(text: str, case, marker: str) -> str:
    """The response less the marked names the request sent itself (the other tenant's user added by name, a refused
    name quoted back in the error): only what the server adds can leak."""
    for value in strings_in([case.path_parameters, case.query, case.body]):
        if marker in value:
            text = text.replace(value, "")
    return text


def strings_in(value) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return set().union(*(strings_in(item) for item in value))
    return set()


@pytest.fixture(scope="module")
def api_schema(django_db_setup, django_db_blocker):
    """Loaded once: the schema view reads no data, but the handler touches the connection around the request."""
    with django_db_blocker.unblock():
        return schemathesis.openapi.from_wsgi("/api/schema/", WSGIHandler())


@pytest.mark.parametrize("role", ["owner", "viewer", "outsider"])
def test_every_operation_answers_as_documented_without_the_other_tenants_data(role, world, api_schema,
                                                                             no_throttling):
    headers = {"Authorization": f"Bearer {world.secrets[role]}"}
    forbidden = next(marker for slug, marker in MARKERS.items() if slug != TENANT_OF[role])
    failed = []
    with in_process_requests() as tracebacks:
        for result in api_schema.get_all_operations():
            operation = result.ok()
            failure = failures_of(operation, strategy_for(operation, world), headers=headers,
                                  forbidden=forbidden, tracebacks=tracebacks)
            if failure:
                failed.append(f"== {operation.label} as {role}\n{failure}")
    if failed:  # pytest.fail, not assert: an assertion's message is cut short, and each failure needs its traceback
        pytest.fail(f"{len(failed)} operations failed:\n" + "\n".join(failed), pytrace=False)
