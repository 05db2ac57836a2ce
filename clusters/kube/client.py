"""The only module of Tidal that imports ``kubernetes`` (pinned to 36.x, the last release on the old models).

:class:`KubeClient` speaks plain dicts (``_preload_content=False`` + ``json``), never generated models, so
what we send is exactly what ``render`` produced and what we get back is what the status mappers read.
Every HTTP call goes through one token bucket (QPS/burst) and one retry loop:

* 429, 500, 502, 503, 504, timeouts and connection errors are retried with exponential backoff and full
  jitter (``Retry-After`` honoured), then raised as :class:`TransientError`;
* anything else that is not 2xx is raised at once as :class:`PermanentError` carrying the HTTP status and
  the API server's reason/message (403 forbidden, 422 invalid, 400 bad request, 404, 409, 410 ...). Callers
  that expect some of them (409 on create, 404 on delete, 410 on watch) check ``error.status``.
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from .errors import ApiError, PermanentError, TransientError
from .ratelimit import Backoff, Bucket, Clock, Sleep, TokenBucket
from .streams import BoundedLines, Interrupt, LogPosition, TimestampedLines

TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
# A log is text, but the API server encodes every error as a JSON Status: asked for text/plain alone it can only
# answer 406 NotAcceptable, hiding the real error (404 when the pod is gone). The log stream itself is not
# negotiated, so accepting JSON too changes nothing for the lines.
LOG_ACCEPT = "text/plain, application/json"
KIND_PLURALS = {"Pod": "pods", "Service": "services", "ConfigMap": "configmaps", "Secret": "secrets"}
# Kinds of other API groups: kind -> (the group's path, plural). Services' Deployments (clusters/kube/serving.py).
GROUP_KINDS = {"Deployment": ("/apis/apps/v1", "deployments")}


class Permission(NamedTuple):
    """One API right Tidal uses: ``namespaced`` rights are needed in every project namespace, the others
    cluster-wide (a request without a namespace, which only a ClusterRoleBinding can allow)."""

    verb: str
    resource: str
    subresource: str = ""
    namespaced: bool = True
    group: str = ""  # the API group ("" the core group, "apps" for deployments)

    def describe(self, namespace: str) -> str:
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.verb} {resource} " + (f"in {namespace}" if self.namespaced else "(cluster-wide)")


MANAGED_KINDS = tuple(KIND_PLURALS.values())
# Every right the backend uses, and no other: "Test connection" checks each (missing_permissions), the RBAC of
# docs/kubernetes.md grants exactly these, and tests/clusters/test_rbac.py holds both to a run of every operation.
REQUIRED_PERMISSIONS: tuple[Permission, ...] = (
    # Project namespaces: dispatch creates (and on 409 gets, to adopt); stop, cleanup and the orphan sweep list by
    # label and delete. The sweep goes namespace by namespace, so none of these is needed cluster-wide.
    *(Permission(verb, kind) for kind in MANAGED_KINDS for verb in ("create", "get", "list", "delete")),
    Permission("get", "pods", "log"),  # log tail and follow, the last lines of a failed replica
    # Services (clusters/kube/serving.py): a Deployment and a Service per service, updated in place with a merge
    # patch when its spec changed, scaled through the Deployment's scale subresource.
    *(Permission(verb, "deployments", group="apps") for verb in ("create", "get", "patch", "delete")),
    Permission("patch", "deployments", "scale", group="apps"),
    Permission("patch", "services"),
    # Cluster-wide: the resync and node sync list pods of every namespace (foreign pods' devices are subtracted from
    # node capacity), the reconciler watches them; node sync lists nodes.
    Permission("list", "pods", namespaced=False),
    Permission("watch", "pods", namespaced=False),
    Permission("list", "nodes", namespaced=False),
    # The evidence of a failed attempt (reliability's diagnosis): its pods' events in their namespace, and its nodes'
    # events, which the kubelet and node-problem-detector record outside any project namespace.
    Permission("list", "events"),
    Permission("list", "events", namespaced=False),
)
# Only with TIDAL_QUARANTINE_CORDON: a quarantined node is cordoned (and uncordoned on release).
CORDON_PERMISSIONS: tuple[Permission, ...] = (Permission("patch", "nodes", namespaced=False),)


@dataclass(frozen=True)
class CreateResult:
    object: dict[str, Any]
    created: bool  # False: it already existed (409) and was adopted


@dataclass(frozen=True)
class WatchEvent:
    """``type`` is ADDED / MODIFIED / DELETED / BOOKMARK from the server, or RELIST (synthetic: ``object``
    is ``{"items": [...]}``, the complete current state, after a first start or a 410 Gone)."""

    type: str
    object: dict[str, Any]


class _Gone(Exception):
    pass


def _reason(exc: k8s.ApiException) -> tuple[str, str]:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    if not isinstance(body, dict):
        body = {}
    return str(body.get("reason") or exc.reason or ""), str(body.get("message") or exc.body or "")[:500]


def _cut(resp: urllib3.BaseHTTPResponse) -> None:
    """Make a read of ``resp`` blocked in another thread return, unless its connection was already given back."""
    if resp.connection is not None:
        resp.shutdown()


def _retry_after(exc: k8s.ApiException) -> float | None:
    value = (exc.headers or {}).get("Retry-After") if exc.headers else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class KubeClient:
    """A small, rate-limited, retrying Kubernetes client for the objects Tidal manages."""

    def __init__(
        self,
        api_client: k8s.ApiClient,
        *,
        qps: float = 50.0,
        burst: int = 100,
        backoff: Backoff | None = None,
        sleep: Sleep = time.sleep,
        clock: Clock = time.monotonic,
        request_timeout: float = 30.0,
        bucket: Bucket | None = None,
    ) -> None:
        self._api = api_client
        # A shared bucket (RedisTokenBucket) when the limit must hold across processes; else this process's own.
        self.bucket = bucket or TokenBucket(qps, burst, clock=clock, sleep=sleep)
        self.backoff = backoff or Backoff()
        self._sleep = sleep
        self.request_timeout = request_timeout
        self.calls = 0  # HTTP requests sent, retries included
        self.retries = 0

    # ----------------------------------------------------------------------------------- construction

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str, *, context: str | None = None, **kwargs: Any) -> KubeClient:
        """Build from the text of a kubeconfig (as stored, decrypted, on the cluster record)."""
        try:
            data = yaml.safe_load(kubeconfig)
        except (yaml.YAMLError, ValueError) as exc:  # ValueError: a date such as 2026-13-45
            raise PermanentError(f"kubeconfig is not valid YAML: {exc}", reason="InvalidKubeconfig") from exc
        if not isinstance(data, dict):
            raise PermanentError("kubeconfig is not a YAML mapping", reason="InvalidKubeconfig")
        configuration = k8s.Configuration()
        try:
            k8s_config.load_kube_config_from_dict(data, context=context, client_configuration=configuration,
                                                  persist_config=False)
        except (k8s_config.ConfigException, KeyError, ValueError, TypeError) as exc:
            raise PermanentError(f"invalid kubeconfig: {exc}", reason="InvalidKubeconfig") from exc
        return cls.from_configuration(configuration, **kwargs)

    @classmethod
    def in_cluster(cls, **kwargs: Any) -> KubeClient:
        """Build from the pod's service account (when Tidal itself runs on the cluster)."""
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)
        return cls.from_configuration(configuration, **kwargs)

    @classmethod
    def from_url(cls, host: str, *, pool_size: int | None = None, **kwargs: Any) -> KubeClient:
        """An unauthenticated client for a plain URL (a local API mock, ``kubectl proxy``)."""
        configuration = k8s.Configuration()
        configuration.host = host
        if pool_size:
            configuration.connection_pool_maxsize = pool_size
        return cls.from_configuration(configuration, **kwargs)

    @classmethod
    def from_configuration(cls, configuration: k8s.Configuration, **kwargs: Any) -> KubeClient:
        configuration.retries = False  # our loop retries; urllib3's own would hide and multiply them
        return cls(k8s.ApiClient(configuration), **kwargs)

    def close(self) -> None:
        self._api.close()

    # ------------------------------------------------------------------------------------- transport

    def _call(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
              timeout: Any = None, accept: str = "application/json",
              content_type: str = "application/json") -> urllib3.BaseHTTPResponse:
        params = [(k, v) for k, v in (query or {}).items() if v not in (None, "")]
        attempt = 0
        while True:
            self.bucket.acquire()
            self.calls += 1
            retry_after: float | None = None
            try:
                return self._api.call_api(
                    path, method, query_params=params, body=body,
                    header_params={"Accept": accept, "Content-Type": content_type},
                    auth_settings=["BearerToken"], _preload_content=False,
                    _request_timeout=timeout or self.request_timeout,
                )
            except k8s.ApiException as exc:
                reason, message = _reason(exc)
                status = exc.status or 0
                if status not in TRANSIENT_STATUSES:
                    raise PermanentError(f"{method} {path}: {status} {reason}: {message}",
                                         status=status, reason=reason) from exc
                retry_after = _retry_after(exc)
                last: ApiError = TransientError(f"{method} {path}: {status} {reason}: {message}",
                                                status=status, reason=reason)
            except urllib3.exceptions.HTTPError as exc:
                last = TransientError(f"{method} {path}: {type(exc).__name__}: {exc}", reason=type(exc).__name__)
            if attempt >= self.backoff.max_retries:
                raise last
            self._sleep(self.backoff.delay(attempt, retry_after))
            attempt += 1
            self.retries += 1

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        resp = self._call(method, path, **kwargs)
        try:
            data = resp.data
        finally:
            resp.release_conn()
        return json.loads(data) if data else {}

    @staticmethod
    def _collection(kind: str, namespace: str | None) -> str:
        root, plural = GROUP_KINDS.get(kind) or ("/api/v1", KIND_PLURALS.get(kind))
        if plural is None:
            raise ValueError(f"unsupported kind {kind!r}")
        return f"{root}/namespaces/{namespace}/{plural}" if namespace else f"{root}/{plural}"

    # ------------------------------------------------------------------------------------ operations

    def create(self, manifest: dict[str, Any]) -> CreateResult:
        """Create; on 409 AlreadyExists adopt the existing object (names are deterministic, so a retried
        dispatch meets its own objects)."""
        meta = manifest["metadata"]
        path = self._collection(manifest["kind"], meta["namespace"])
        try:
            return CreateResult(self._json("POST", path, body=manifest), True)
        except PermanentError as exc:
            if exc.status != 409:
                raise
        existing = self.get(manifest["kind"], meta["namespace"], meta["name"])
        return CreateResult(existing or dict(manifest), False)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self._json("GET", f"{self._collection(kind, namespace)}/{name}")
        except PermanentError as exc:
            if exc.status == 404:
                return None
            raise

    def patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any], *,
              subresource: str = "") -> dict[str, Any]:
        """A JSON merge patch (RFC 7386) of a namespaced object, or of its ``subresource`` (a Deployment's
        ``scale``): maps are merged (``None`` removes a key), lists replaced whole. Raises on 404."""
        path = f"{self._collection(kind, namespace)}/{name}" + (f"/{subresource}" if subresource else "")
        return self._json("PATCH", path, body=patch, content_type="application/merge-patch+json")

    def delete(self, kind: str, namespace: str, name: str, *, grace_seconds: int | None = None,
               propagation: str = "Background") -> bool:
        """Delete with a grace period; False if it was already gone."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            self._json("DELETE", f"{self._collection(kind, namespace)}/{name}", body=body)
        except PermanentError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def list(self, kind: str, namespace: str | None = None, *, label_selector: str = "",
             field_selector: str = "", page_size: int = 500) -> tuple[list[dict[str, Any]], str]:
        """All objects (paginated); returns (items, resourceVersion of the list)."""
        return self._paged(self._collection(kind, namespace), label_selector=label_selector,
                           field_selector=field_selector, page_size=page_size)

    def _paged(self, path: str, *, label_selector: str = "", field_selector: str = "",
               page_size: int = 500) -> tuple[builtins.list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            data = self._json("GET", path, query={
                "labelSelector": label_selector, "fieldSelector": field_selector,
                "limit": page_size, "continue": token,
            })
            items.extend(data.get("items") or [])
            meta = data.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    def list_nodes(self, *, field_selector: str = "") -> builtins.list[dict[str, Any]]:
        return self._paged("/api/v1/nodes", field_selector=field_selector)[0]

    def list_events(self, namespace: str | None, *, field_selector: str = "") -> builtins.list[dict[str, Any]]:
        """Core events (`v1`) of a namespace, or of every namespace; the selector narrows what the server sends,
        callers still check what they get."""
        path = f"/api/v1/namespaces/{namespace}/events" if namespace else "/api/v1/events"
        return self._paged(path, field_selector=field_selector)[0]

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of a node (`spec.unschedulable`, an annotation; `None` removes a key)."""
        return self._json("PATCH", f"/api/v1/nodes/{name}", body=patch, content_type="application/merge-patch+json")

    def pod_log(self, namespace: str, name: str, *, container: str = "main", tail_lines: int = 100) -> str:
        resp = self._call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}/log",
                          query={"container": container, "tailLines": tail_lines}, accept=LOG_ACCEPT)
        try:
            return resp.data.decode("utf-8", errors="replace")
        finally:
            resp.release_conn()

    def follow_log(self, namespace: str, name: str, *, container: str = "main", tail_lines: int = 100,
                   max_seconds: float = 3600.0, after: LogPosition | None = None) -> TimestampedLines:
        """The pod's last ``tail_lines`` lines (or, given the position an earlier follow reached, every line after
        it), then new ones as they are written, until the container ends (the API server closes the stream) or
        ``max_seconds`` pass. The lines are read with their timestamps, which keep the position (and are removed).

        The request is the one ``CoreV1Api.read_namespaced_pod_log(follow=True, _preload_content=False)`` sends (which
        accepts JSON too, see ``LOG_ACCEPT``), made through ``_call`` so it takes a rate-limit token, retries and maps
        errors like every other call. It
        connects here, so a missing pod raises now, before the caller has sent anything; no read timeout, since a
        training job may print nothing for an hour.
        """
        query: dict[str, Any] = {"container": container, "follow": "true", "timestamps": "true"}
        if after is None:
            query["tailLines"] = tail_lines
        elif after.since_time() is not None:
            query["sinceTime"] = after.since_time()
        resp = self._call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}/log", query=query, accept=LOG_ACCEPT,
                          timeout=(10, None))

        def stop() -> None:
            if resp.connection is None:  # read to the end: urllib3 already gave the connection back to its pool
                return
            resp.shutdown()  # unblocks a read in progress in the pump thread
            resp.close()  # cut off mid-stream, the connection cannot be reused

        lines = BoundedLines(resp.stream(65536, decode_content=True), max_seconds=max_seconds, stop=stop)
        return TimestampedLines(lines, after)

    def server_version(self) -> dict[str, Any]:
        return self._json("GET", "/version")

    def missing_permissions(self, namespace: str, extra: tuple[Permission, ...] = ()) -> builtins.list[str]:
        """One SelfSubjectAccessReview per right in ``REQUIRED_PERMISSIONS`` and ``extra`` (namespaced ones in
        ``namespace``); returns the denied ones, e.g. ``"delete pods in tidal-nlp"``, ``"watch pods (cluster-wide)"``.
        """
        return [permission.describe(namespace) for permission in (*REQUIRED_PERMISSIONS, *extra)
                if not self.allowed(permission, namespace)]

    def allowed(self, permission: Permission, namespace: str) -> bool:
        attributes: dict[str, str] = {"verb": permission.verb, "resource": permission.resource}
        if permission.group:
            attributes["group"] = permission.group
        if permission.subresource:
            attributes["subresource"] = permission.subresource
        if permission.namespaced:
            attributes["namespace"] = namespace
        review = self._json("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        })
        return bool((review.get("status") or {}).get("allowed"))

    # ----------------------------------------------------------------------------------------- watch

    def watch(self, kind: str, namespace: str | None, *, label_selector: str, resource_version: str,
              timeout_seconds: int = 60, interrupt: Interrupt | None = None) -> Iterator[WatchEvent]:
        """One watch round from ``resource_version``; ends when the server closes the stream, nothing arrives for
        ``timeout_seconds`` (+5 s) or ``interrupt`` is set (its connection is then shut down at once, so a process
        stopping never waits for the round's timeout). Raises ``_Gone`` on 410 (HTTP or an ERROR event)."""
        try:
            resp = self._call("GET", self._collection(kind, namespace), query={
                "watch": "true", "labelSelector": label_selector, "resourceVersion": resource_version,
                "allowWatchBookmarks": "true", "timeoutSeconds": timeout_seconds,
            }, timeout=(10, timeout_seconds + 5))
        except PermanentError as exc:
            if exc.status == 410:
                raise _Gone() from exc
            raise
        interrupt = interrupt or Interrupt()
        buffer = b""
        try:
            with interrupt.attached(lambda: _cut(resp)):
                for chunk in resp.stream(65536, decode_content=True):
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        event = self._event(line)
                        if event is not None:
                            yield event
        except urllib3.exceptions.HTTPError:
            return  # read timeout, dropped or cut connection: the round is over; what is left is a partial line
        finally:
            if interrupt.is_set():
                resp.close()  # cut mid-stream: the connection cannot be reused
            else:
                resp.release_conn()
        if interrupt.is_set():
            return  # a shut-down read can look like a clean end; a partial line is no event
        event = self._event(buffer)
        if event is not None:
            yield event

    @staticmethod
    def _event(line: bytes) -> WatchEvent | None:
        line = line.strip()
        if not line:
            return None
        data = json.loads(line)
        if not isinstance(data, dict):
            raise TransientError(f"malformed watch event: {line[:200]!r}", reason="MalformedEvent")
        obj = data.get("object") or {}
        if data.get("type") == "ERROR":
            if obj.get("code") == 410:
                raise _Gone()
            raise TransientError(f"watch error: {obj.get('message', obj)}", status=obj.get("code"),
                                 reason=str(obj.get("reason", "")))
        return WatchEvent(str(data.get("type")), obj)


class Watcher:
    """Resumable watch of the platform's objects of one kind (pods by default).

    Starts with a list (a RELIST event holding every item), then watches from the list's resourceVersion,
    remembering the last version seen (including BOOKMARKs). On 410 Gone it lists again and emits RELIST,
    so the consumer replaces its state instead of applying a diff. Pair it with a periodic full resync.
    ``close()``, from any thread, ends the events at once, even in a round blocked on a silent stream.
    """

    def __init__(self, client: KubeClient, *, label_selector: str, namespace: str | None = None,
                 kind: str = "Pod", timeout_seconds: int = 60) -> None:
        self.client = client
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.timeout_seconds = timeout_seconds
        self.resource_version: str | None = None
        self.relists = 0
        self._interrupt = Interrupt()

    @property
    def closed(self) -> bool:
        return self._interrupt.is_set()

    def close(self) -> None:
        """Stop watching: the round under way ends now (its connection is shut down) and no other starts."""
        self._interrupt.set()

    def relist(self) -> WatchEvent:
        items, version = self.client.list(self.kind, self.namespace, label_selector=self.label_selector)
        self.resource_version = version
        self.relists += 1
        return WatchEvent("RELIST", {"items": items})

    def events(self, rounds: int | None = None) -> Iterator[WatchEvent]:
        done = 0
        while (rounds is None or done < rounds) and not self.closed:
            done += 1
            if self.resource_version is None:
                yield self.relist()
                if self.closed:
                    return
            try:
                for event in self.client.watch(self.kind, self.namespace, label_selector=self.label_selector,
                                               resource_version=self.resource_version or "",
                                               timeout_seconds=self.timeout_seconds, interrupt=self._interrupt):
                    version = (event.object.get("metadata") or {}).get("resourceVersion")
                    if version:
                        self.resource_version = str(version)
                    if event.type != "BOOKMARK":
                        yield event
            except _Gone:
                if not self.closed:
                    yield self.relist()
