"""KubeClient over real HTTP against the kmock API emulator."""

from __future__ import annotations

import threading
import time

import pytest
import urllib3

from clusters.kube.client import REQUIRED_PERMISSIONS, KubeClient, Watcher
from clusters.kube.errors import PermanentError, TransientError
from clusters.kube.ratelimit import Backoff
from tests.clusters.kube.apiserver import accepts_json

NS = "tidal"


def configmap(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS, "labels": labels}, "data": {"k": "v"}}


def pod(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


def status_body(code: int, reason: str, message: str = "") -> dict:
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code, "reason": reason,
            "message": message or reason}


def test_create_then_get_and_list(client: KubeClient, kube) -> None:
    result = client.create(pod("p1", app="x"))
    assert result.created
    assert result.object["metadata"]["name"] == "p1"
    assert (NS, "p1") in kube.objects("pods")
    assert client.get("Pod", NS, "p1")["spec"]["containers"][0]["image"] == "busybox"
    assert client.get("Pod", NS, "missing") is None
    items, _ = client.list("Pod", NS, label_selector="app=x")
    assert [i["metadata"]["name"] for i in items] == ["p1"]


def test_create_409_adopts_existing_object(client: KubeClient, kube) -> None:
    kube.put("configmaps", NS, configmap("cm", owner="earlier-try"))
    result = client.create(configmap("cm", owner="this-try"))
    assert not result.created
    assert result.object["metadata"]["labels"] == {"owner": "earlier-try"}  # the existing one, not ours
    assert len(kube.handler[kube.handler.action.CREATE]) == 1


def test_429_is_retried_with_backoff_honouring_retry_after(make_client, kube, sleeps) -> None:
    kube.handler["get /version"][:2] << 429 << {"Retry-After": "1"} << status_body(429, "TooManyRequests")
    client = make_client()
    version = client.server_version()
    assert version["gitVersion"].startswith("v1.")
    assert client.retries == 2
    assert sleeps == [1.0, 1.0]  # Retry-After wins over the (smaller) jittered backoff


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_is_retried_then_succeeds(make_client, kube, sleeps, status) -> None:
    kube.handler["post /api/v1/namespaces/tidal/configmaps"][:1] << status << status_body(status, "Boom")
    client = make_client()
    result = client.create(configmap("cm"))
    # kmock stores the object even when a reaction answers 5xx, so the retry meets it: 409 -> adopted.
    assert result.object["metadata"]["name"] == "cm"
    assert client.retries == 1
    assert sleeps == [0.05]  # base 0.1 * 2**0 * jitter 0.5


def test_exponential_backoff_then_transient_error(make_client, kube, sleeps) -> None:
    kube.handler["get /version"] << 503 << status_body(503, "ServiceUnavailable", "etcd is down")
    client = make_client(backoff=Backoff(base=0.1, cap=0.3, max_retries=3, rand=lambda: 1.0))
    with pytest.raises(TransientError) as info:
        client.server_version()
    assert info.value.status == 503
    assert "etcd is down" in str(info.value)
    assert sleeps == [0.1, 0.2, 0.3]  # doubling, capped
    assert client.calls == 4


def test_connection_error_is_transient(sleeps) -> None:
    client = KubeClient.from_url(  # the discard port: connection refused
        "http://127.0.0.1:9", sleep=sleeps.append, backoff=Backoff(max_retries=2, rand=lambda: 0.5))
    with pytest.raises(TransientError):
        client.server_version()
    assert len(sleeps) == 2


@pytest.mark.parametrize(("status", "reason"), [(403, "Forbidden"), (422, "Invalid"), (400, "BadRequest")])
def test_permanent_errors_are_not_retried(make_client, kube, sleeps, status, reason) -> None:
    kube.handler["post /api/v1/namespaces/tidal/pods"] << status << status_body(
        status, reason, f'pods "p" is {reason.lower()}: user "tidal" cannot create')
    client = make_client()
    with pytest.raises(PermanentError) as info:
        client.create(pod("p"))
    assert info.value.status == status
    assert info.value.reason == reason
    assert "cannot create" in str(info.value)
    assert sleeps == []
    assert client.calls == 1


def test_delete_with_grace_period_and_missing_is_false(client: KubeClient, kube) -> None:
    client.create(pod("p1"))
    assert client.delete("Pod", NS, "p1", grace_seconds=15) is True
    request = kube.handler[kube.handler.action.DELETE][0]
    assert request.data["gracePeriodSeconds"] == 15
    assert request.data["propagationPolicy"] == "Background"
    assert (NS, "p1") not in kube.objects("pods")
    assert client.delete("Pod", NS, "p1") is False


def test_rate_limit_applies_to_every_call(make_client, kube, sleeps) -> None:
    client = make_client(qps=10.0, burst=2, clock=lambda: 0.0)  # frozen clock: no refill
    for i in range(4):
        client.create(configmap(f"c{i}"))
    assert sleeps == [pytest.approx(0.1), pytest.approx(0.2)]  # 3rd and 4th call wait for tokens


def test_list_nodes_pod_log_and_version(client: KubeClient, kube) -> None:
    kube.put("nodes", None, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"}})
    assert [n["metadata"]["name"] for n in client.list_nodes()] == ["gpu-1"]
    kube.handler["get /api/v1/namespaces/tidal/pods/p1/log"] << b"line 1\nline 2\n"
    assert client.pod_log(NS, "p1", tail_lines=2) == "line 1\nline 2\n"
    request = kube.handler["get /api/v1/namespaces/tidal/pods/p1/log"][0]
    assert request.params == {"container": "main", "tailLines": "2"}
    assert client.server_version()["major"] == "1"


def test_log_of_a_missing_pod_is_a_404_not_a_406(client: KubeClient, kube) -> None:
    """The API server encodes errors as a JSON Status: a log request that accepted only text/plain got 406 for every
    error, so "the pod is gone" was never recognised."""
    with pytest.raises(PermanentError) as tail:
        client.pod_log(NS, "gone", tail_lines=5)
    with pytest.raises(PermanentError) as follow:
        client.follow_log(NS, "gone", tail_lines=5, max_seconds=5)
    assert (tail.value.status, follow.value.status) == (404, 404)
    for request in kube.handler["get /api/v1/namespaces/tidal/pods/gone/log"]:
        assert accepts_json(request.headers["Accept"]) and "text/plain" in request.headers["Accept"]


def test_the_emulator_answers_406_to_errors_it_cannot_encode(kube) -> None:
    """Like the API server, kmock's gate answers 406 NotAcceptable when Accept allows no JSON for an error."""
    http = urllib3.PoolManager()
    url = f"{kube.url}/api/v1/namespaces/{NS}/pods/gone/log"
    text_only = http.request("GET", url, headers={"Accept": "text/plain"})
    assert text_only.status == 406 and text_only.json()["reason"] == "NotAcceptable"
    for accept in ("text/plain, application/json", "application/json", "*/*", ""):
        assert http.request("GET", url, headers={"Accept": accept}).status == 404, accept
    kube.handler["get /api/v1/namespaces/tidal/pods/p1/log"] << b"a line\n"
    assert http.request("GET", url.replace("gone", "p1"), headers={"Accept": "text/plain"}).data == b"a line\n"


@pytest.mark.parametrize(("accept", "expected"), [
    ("", True), ("application/json", True), ("text/plain, application/json;q=0.5", True), ("*/*", True),
    ("application/*", True), ("text/plain", False), ("application/json;q=0", False), ("application/yaml", False),
])
def test_accept_negotiation_of_the_emulator(accept: str, expected: bool) -> None:
    assert accepts_json(accept) is expected


def test_missing_permissions_via_selfsubjectaccessreview(client: KubeClient, kube) -> None:
    handler = kube.handler

    def review(request):
        for key, obj in list(handler.objects.items()):  # kmock stores each review; forget it
            if key[0].plural == "selfsubjectaccessreviews":
                obj.delete()
        attrs = request.data["spec"]["resourceAttributes"]
        allowed = not (attrs["verb"] == "delete" and attrs["resource"] == "pods") and attrs["resource"] != "nodes"
        return {**request.data, "status": {"allowed": allowed}}

    handler["post /apis/authorization.k8s.io/v1/selfsubjectaccessreviews"] << review
    missing = client.missing_permissions(NS)
    assert missing == ["delete pods in tidal", "list nodes (cluster-wide)"]
    assert len(handler["post /apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]) == len(REQUIRED_PERMISSIONS)
    first = handler["post /apis/authorization.k8s.io/v1/selfsubjectaccessreviews"][0]
    assert first.headers["Authorization"] == "Bearer test-token"


def test_invalid_kubeconfig_is_permanent() -> None:
    with pytest.raises(PermanentError):
        KubeClient.from_kubeconfig("- just\n- a list\n")
    with pytest.raises(PermanentError):
        KubeClient.from_kubeconfig("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    with pytest.raises(PermanentError, match="not valid YAML"):  # safe_load's ValueError escaped as it was
        KubeClient.from_kubeconfig("apiVersion: v1\nkind: Config\nexpires: 2026-13-45\n")


def test_watch_lists_first_then_streams_events(client: KubeClient, kube) -> None:
    client.create(pod("p1", **{"tidal.dev/managed": "true"}))
    watcher = Watcher(client, label_selector="tidal.dev/managed=true", namespace=NS, timeout_seconds=1)
    events = watcher.events(rounds=1)
    first = next(events)
    assert first.type == "RELIST"
    assert [i["metadata"]["name"] for i in first.object["items"]] == ["p1"]
    second = next(events)  # kmock replays current objects as ADDED at the start of a watch
    assert (second.type, second.object["metadata"]["name"]) == ("ADDED", "p1")
    request = kube.handler[kube.handler.action.WATCH][0]
    assert request.params["labelSelector"] == "tidal.dev/managed=true"
    assert request.params["allowWatchBookmarks"] == "true"
    assert watcher.relists == 1


def test_watch_410_gone_relists(client: KubeClient, kube) -> None:
    client.create(pod("p1"))
    kube.handler[kube.handler.action.WATCH][:1] << 410 << status_body(410, "Expired", "too old resource version")
    watcher = Watcher(client, label_selector="", namespace=NS, timeout_seconds=1)
    watcher.resource_version = "12345"  # resuming from a version the server compacted away
    events = watcher.events(rounds=1)
    event = next(events)
    assert event.type == "RELIST"
    assert watcher.relists == 1
    assert kube.handler[kube.handler.action.WATCH][0].params["resourceVersion"] == "12345"


def test_watch_410_as_error_event_relists(client: KubeClient, kube) -> None:
    gone = {"type": "ERROR", "object": status_body(410, "Expired", "too old resource version")}
    kube.handler[kube.handler.action.WATCH][:1] << (gone,)  # a tuple is served as a JSON-lines stream
    watcher = Watcher(client, label_selector="", namespace=NS, timeout_seconds=1)
    watcher.resource_version = "7"
    assert [e.type for e in watcher.events(rounds=1)] == ["RELIST"]


def wait_for(condition, seconds: float = 30.0) -> bool:
    """Poll ``condition`` until true; the bound is generous, it only keeps a broken test from hanging."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_close_ends_a_watch_round_blocked_on_a_silent_stream(client: KubeClient, kube) -> None:
    client.create(pod("p1"))
    watcher = Watcher(client, label_selector="", namespace=NS, timeout_seconds=3600)  # the round would last an hour
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(e.type for e in watcher.events()), daemon=True)
    reader.start()
    assert wait_for(lambda: seen == ["RELIST", "ADDED"])  # the round is open and now silent
    watcher.close()
    reader.join(30)
    assert not reader.is_alive()  # only the cut connection can end the round this early
    assert watcher.closed and seen == ["RELIST", "ADDED"]
    assert len(kube.handler[kube.handler.action.WATCH]) == 1  # closed: no new round


def test_a_closed_watcher_opens_no_round(client: KubeClient, kube) -> None:
    watcher = Watcher(client, label_selector="", namespace=NS, timeout_seconds=3600)
    watcher.close()
    assert list(watcher.events(rounds=3)) == []
    assert len(kube.handler[kube.handler.action.WATCH]) == 0 and client.calls == 0
