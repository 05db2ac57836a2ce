"""What a real kube-apiserver does in front of its storage and kmock does not, so the tests meet it too.

* **Content negotiation.** The API server encodes every JSON answer, errors included (a ``Status``), with the
  serializer the ``Accept`` header asks for; when the header allows none of its serializers (``text/plain`` only)
  it answers 406 NotAcceptable instead of the real error. Streams (a pod's log, a watch) are not negotiated.
* **RBAC** (when a test sets ``gate.policy``). Every resource request is turned into the attributes the API server
  authorizes (verb, group, resource, subresource, namespace) and refused with 403 Forbidden unless a rule of the
  caller's Roles/ClusterRoles, bound by a RoleBinding in that namespace or a ClusterRoleBinding, allows it; a
  cluster-wide request (no namespace) is allowed only by a ClusterRoleBinding. SelfSubjectAccessReviews are
  answered from the same rules. The gate records what it authorized and what it refused.
* **Outages** (when a test or `make chaos` sets ``gate.outage``): every n-th request is held for a while (a client
  with a shorter timeout sees a timeout; the request is still served afterwards, as an API server finishes a create
  its client gave up on) and/or answered with an error status (429 with ``Retry-After``, 500, 503) instead of being
  served.

:class:`ApiServerGate` wraps kmock's handler: kmock's ``Server`` builds its HTTP server through ``server_cls``, and
:class:`GatedServer` is that class with the gate in front, so every request of every test goes through it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp.test_utils
import aiohttp.web
import yaml

Handler = Callable[[aiohttp.web.BaseRequest], Awaitable[aiohttp.web.StreamResponse]]

# The media ranges under which the API server can encode a JSON answer.
JSON_RANGES = frozenset({"application/json", "application/*", "*/*"})
NOT_ACCEPTABLE = ("only the following media types are accepted: application/json, application/yaml, "
                  "application/vnd.kubernetes.protobuf")


def accepts_json(accept: str | None) -> bool:
    """Whether an ``Accept`` header lets the server answer JSON. No header (or an empty one) accepts anything."""
    if not accept or not accept.strip():
        return True
    for clause in accept.split(","):
        media, *params = (part.strip() for part in clause.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if media.lower() in JSON_RANGES and quality > 0:
            return True
    return False


def status_response(code: int, reason: str, message: str) -> aiohttp.web.Response:
    """A ``Status`` object, the API server's shape of every error."""
    return aiohttp.web.json_response({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                                      "message": message, "reason": reason, "code": code}, status=code)


def negotiate(request: aiohttp.web.BaseRequest, response: aiohttp.web.StreamResponse) -> aiohttp.web.StreamResponse:
    """The answer as the API server would send it: a JSON answer the client does not accept becomes 406."""
    if response.prepared or response.content_type != "application/json":
        return response  # a stream already under way, or bytes served as they are (a pod log)
    if accepts_json(request.headers.get("Accept")):
        return response
    return status_response(406, "NotAcceptable", NOT_ACCEPTABLE)


# ------------------------------------------------------------------------------------------------------- RBAC

CALLER = {"kind": "ServiceAccount", "name": "tidal", "namespace": "tidal-system"}  # who the tests' clients are
CALLER_USER = f"system:serviceaccount:{CALLER['namespace']}:{CALLER['name']}"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "kubernetes.md"
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass(frozen=True)
class Attributes:
    """What RBAC decides on. ``namespace`` is empty for a cluster-wide request."""

    verb: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    group: str = ""

    def describe(self) -> str:
        scope = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return (f'{resource} is forbidden: User "{CALLER_USER}" cannot {self.verb} resource "{resource}" in API group '
                f'"{self.group}" {scope}')


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes | None:
    """The RBAC attributes of a request, as the API server derives them; None for a non-resource URL (/version,
    discovery), which every authenticated user may read."""
    parts = [part for part in path.split("/") if part]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return None
    resource, name, subresource = (*rest, "", "")[:3]
    if method == "GET":
        verb = "get" if name else ("watch" if query.get("watch") in ("true", "1") else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = VERBS.get(method, method.lower())
    return Attributes(verb, resource, subresource, namespace, group)


@dataclass(frozen=True)
class Rule:
    groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]

    @classmethod
    def of(cls, rule: Mapping[str, Any]) -> Rule:
        return cls(frozenset(rule.get("apiGroups") or ()), frozenset(rule.get("resources") or ()),
                   frozenset(rule.get("verbs") or ()))

    def allows(self, attributes: Attributes) -> bool:
        resource = (f"{attributes.resource}/{attributes.subresource}" if attributes.subresource
                    else attributes.resource)
        return ((attributes.group in self.groups or "*" in self.groups)
                and (resource in self.resources or "*" in self.resources)
                and (attributes.verb in self.verbs or "*" in self.verbs))


def _binds_caller(binding: Mapping[str, Any]) -> bool:
    return any(subject.get("kind") == CALLER["kind"] and subject.get("name") == CALLER["name"]
               and subject.get("namespace") == CALLER["namespace"] for subject in binding.get("subjects") or ())


class Policy:
    """The caller's RBAC rules, from Role, ClusterRole, RoleBinding and ClusterRoleBinding documents."""

    def __init__(self, documents: Iterable[Mapping[str, Any]]) -> None:
        documents = [d for d in documents if d]
        roles: dict[tuple[str, str, str], list[Rule]] = {}
        for doc in documents:
            if doc["kind"] in ("Role", "ClusterRole"):
                namespace = doc["metadata"].get("namespace", "") if doc["kind"] == "Role" else ""
                roles[doc["kind"], namespace, doc["metadata"]["name"]] = [Rule.of(r) for r in doc.get("rules") or ()]
        self.cluster_rules: list[Rule] = []
        self.namespace_rules: dict[str, list[Rule]] = {}
        for doc in documents:
            if doc["kind"] not in ("RoleBinding", "ClusterRoleBinding") or not _binds_caller(doc):
                continue
            ref = doc["roleRef"]
            if doc["kind"] == "ClusterRoleBinding":
                self.cluster_rules += roles.get(("ClusterRole", "", ref["name"]), [])
                continue
            namespace = doc["metadata"]["namespace"]
            role_namespace = namespace if ref["kind"] == "Role" else ""
            self.namespace_rules.setdefault(namespace, []).extend(roles.get((ref["kind"], role_namespace,
                                                                             ref["name"]), []))

    def allows(self, attributes: Attributes) -> bool:
        rules = self.cluster_rules + (self.namespace_rules.get(attributes.namespace, [])
                                      if attributes.namespace else [])
        return any(rule.allows(attributes) for rule in rules)


def documented_rbac(namespaces: Iterable[str], *, markdown: Path = DOCS) -> list[dict[str, Any]]:
    """The RBAC manifests of docs/kubernetes.md (its first ``yaml`` block after "### RBAC"), with the per-project
    RoleBinding applied in each of ``namespaces`` as the doc says to."""
    text = markdown.read_text()
    block = text[text.index("### RBAC"):].split("```yaml\n", 1)[1].split("```", 1)[0]
    out: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(block):
        if doc and doc["kind"] == "RoleBinding":
            out += [{**doc, "metadata": {**doc["metadata"], "namespace": ns}} for ns in namespaces]
        elif doc:
            out.append(doc)
    return out


# ---------------------------------------------------------------------------------------------------- outages

@dataclass(frozen=True)
class Outage:
    """A scripted fault: of the requests for one thing (method, path and query, and a create's object name), the
    first and then every ``every``-th is held ``delay`` seconds, then answered ``status`` (0: served as usual after
    the delay). Counted per thing, not over all requests: the backend creates a job's objects in parallel, and a
    count over all of them could land one create's every retry on a fault."""

    status: int = 0
    delay: float = 0.0
    every: int = 1
    retry_after: int = 1  # seconds, on a 429

    def answer(self) -> aiohttp.web.Response:
        reasons = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
        response = status_response(self.status, reasons.get(self.status, "InternalError"), "injected outage")
        if self.status == 429:
            response.headers["Retry-After"] = str(self.retry_after)
        return response


# ------------------------------------------------------------------------------------------------------ gate

class ApiServerGate:
    """The API server's own layers in front of kmock's storage. ``policy`` None: every request is allowed."""

    def __init__(self) -> None:
        self.policy: Policy | None = None
        self.authorized: list[Attributes] = []  # resource requests the policy allowed
        self.denied: list[Attributes] = []
        self.outage: Outage | None = None
        self.seen = 0  # requests that reached the gate
        self.faulted = 0  # requests an outage held or answered
        self.tries: dict[tuple[str, ...], int] = {}  # requests per thing (see Outage)

    def wrap(self, handler: Handler) -> Handler:
        async def serve(request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
            outage = self.outage
            self.seen += 1
            if outage is None or await self._try(request) % outage.every != 1 % outage.every:
                return await self._serve(handler, request)
            self.faulted += 1
            if outage.status:
                await asyncio.sleep(outage.delay)
                return outage.answer()
            # Held, then served even if the client gave up meanwhile (its disconnection cancels this handler, not
            # the shielded work, which read the body first), as an API server completes a create whose client timed
            # out.
            await request.read()
            return await asyncio.shield(self._serve(handler, request, delay=outage.delay))

        return serve

    async def _try(self, request: aiohttp.web.BaseRequest) -> int:
        """How many times this thing was asked for, this request included."""
        key: tuple[str, ...] = (request.method, request.path_qs)
        if request.method == "POST":
            body = await request.read()  # kept: the handler reads it again
            key += (str((yaml.safe_load(body) or {}).get("metadata", {}).get("name", "")),) if body else ()
        self.tries[key] = self.tries.get(key, 0) + 1
        return self.tries[key]

    async def _serve(self, handler: Handler, request: aiohttp.web.BaseRequest, *,
                     delay: float = 0.0) -> aiohttp.web.StreamResponse:
        await asyncio.sleep(delay)
        refusal = await self._authorize(request)
        if refusal is not None:
            return refusal
        return negotiate(request, await handler(request))

    async def _authorize(self, request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse | None:
        """None to serve the request; else the API server's own answer (a 403, or a SelfSubjectAccessReview)."""
        policy = self.policy
        attributes = request_attributes(request.method, request.path, request.query)
        if policy is None or attributes is None:
            return None
        if attributes.resource == "selfsubjectaccessreviews" and attributes.verb == "create":
            return await self._review(request, policy)  # allowed to every authenticated user (system:basic-user)
        if policy.allows(attributes):
            self.authorized.append(attributes)
            return None
        self.denied.append(attributes)
        return status_response(403, "Forbidden", attributes.describe())

    @staticmethod
    async def _review(request: aiohttp.web.BaseRequest, policy: Policy) -> aiohttp.web.StreamResponse:
        review = await request.json()
        asked = review["spec"]["resourceAttributes"]
        attributes = Attributes(asked["verb"], asked["resource"], asked.get("subresource", ""),
                                asked.get("namespace", ""), asked.get("group", ""))
        allowed = policy.allows(attributes)
        status = {"allowed": allowed} if allowed else {"allowed": False, "reason": attributes.describe()}
        return aiohttp.web.json_response({**review, "status": status}, status=201)


class GatedServer(aiohttp.test_utils.RawTestServer):
    """aiohttp's raw test server serving kmock's handler through an :class:`ApiServerGate`."""

    def __init__(self, handler: Handler, *, gate: ApiServerGate, **kwargs: Any) -> None:
        super().__init__(gate.wrap(handler), **kwargs)
