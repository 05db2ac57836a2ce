"""The API's refusals in its OpenAPI schema.

drf-spectacular documents only an operation's success. Every operation can also refuse, always with the one error
body of `core.errors` (`{"error": {"code", "message", "fields"}}`): this post-processing hook adds that body as the
`Error` component and lists, per operation, the statuses it can answer with, so a generated client (and the fuzz
test, tests/fuzz/) knows them. An operation's own `@extend_schema(responses=...)` for a status wins.
"""

from __future__ import annotations

from typing import Any

ERROR_REF = {"$ref": "#/components/schemas/Error"}
ERROR_SCHEMA = {
    "type": "object",
    "description": "Every 4xx answer of the API, and its 503.",
    "properties": {"error": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "Stable, for programs: invalid, not_found, permission_denied, "
                                                      "not_authenticated, throttled, conflict, ..."},
            "message": {"type": "string", "description": "For people."},
            "fields": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                       "description": "Invalid input by field name (dotted and indexed for nested fields)."},
        },
        "required": ["code", "message", "fields"],
    }},
    "required": ["error"],
}
WRITES = {"post", "put", "patch", "delete"}


def refusals(method: str, path: str, operation: dict[str, Any]) -> dict[str, str]:
    """status -> why, for one operation."""
    statuses = {
        "401": "No valid credentials: a missing, malformed, expired or revoked token.",
        "403": "Not allowed: the caller's role in the project, platform staff only, or a read-only token writing.",
        "429": "Too many requests from this token; Retry-After says when to try again.",
        "503": "The database is unreachable for a moment (database_unavailable); Retry-After says when to try again.",
        "414": "The address, with its query, is too long (uri_too_long; `message` says the limit).",
    }
    names = {parameter["name"] for parameter in operation.get("parameters", ())}
    if names or "requestBody" in operation:
        statuses["400"] = "Invalid input; `fields` names each bad field."
    if "requestBody" in operation:
        statuses["413"] = "The body is over the size limit (too_large; `message` says which)."
        statuses["415"] = "The body's Content-Type is missing or not one the operation reads " \
                          "(unsupported_media_type; `message` lists those it reads)."
    if "{" in path or "page" in names:
        statuses["404"] = "Nothing there that the caller may see (another tenant's object reads as missing), or " \
                          "a page past the last."
    if method in WRITES:
        statuses["409"] = "Conflicts with the object's state (a job that already finished, an object still " \
                          "referenced by others)."
    return statuses


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"] entry."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for status, description in refusals(method, path, operation).items():
                responses.setdefault(status, {"description": description,
                                              "content": {"application/json": {"schema": ERROR_REF}}})
    return result
