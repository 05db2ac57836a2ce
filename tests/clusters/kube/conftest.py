"""Fixtures: a kmock Kubernetes API emulator served over real HTTP from a background thread.

The Kubernetes client is synchronous (urllib3) and kmock is asyncio, so kmock gets its own event loop in
a thread; the tests stay synchronous and talk to it over TCP like to a real API server. Requests pass through an
:class:`~tests.clusters.kube.apiserver.ApiServerGate` first, which plays the API server's layers kmock lacks
(content negotiation).
"""

from __future__ import annotations

import asyncio
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # running with -p no:django, nothing else puts the project on the path
    sys.path.insert(0, str(ROOT))

import kmock  # noqa: E402

from clusters.kube.client import KubeClient  # noqa: E402
from clusters.kube.ratelimit import Backoff  # noqa: E402
from tests.clusters.kube.apiserver import ApiServerGate, GatedServer  # noqa: E402

RESOURCES = ("v1/pods", "v1/services", "v1/configmaps", "v1/secrets", "v1/nodes", "v1/events", "apps/v1/deployments")


class KMockThread:
    """A ``kmock.KubernetesEmulator`` + ``kmock.Server`` running on a private loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.handler: kmock.KubernetesEmulator
        self.gate = ApiServerGate()
        self.url = ""

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server_cls = functools.partial(GatedServer, gate=self.gate)
        async with kmock.KubernetesEmulator() as handler, kmock.Server(handler, server_cls=server_cls) as server:
            for resource in RESOURCES:
                handler.resources[resource] = {}
            self.handler = handler
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def start(self) -> KMockThread:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("kmock did not start")
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def objects(self, plural: str) -> dict[tuple[str | None, str], dict[str, Any]]:
        """Live (not deleted) objects of a resource, by (namespace, name)."""
        out = {}
        for (resource, namespace, name), obj in list(self.handler.objects.items()):
            if resource.plural == plural and not obj.deleted:
                out[(namespace, name)] = obj.raw
        return out

    def put(self, plural: str, namespace: str | None, obj: dict[str, Any], *, group: str = "") -> None:
        """Seed an object as if another actor had created it (or a controller had updated it)."""
        resource = kmock.resource(group, "v1", plural)
        self.handler.objects[resource, namespace, obj["metadata"]["name"]] = obj

    def kubeconfig(self) -> str:
        return (
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: mock\n  cluster:\n    server: {self.url}\n"
            "users:\n- name: tidal\n  user:\n    token: test-token\n"
            "contexts:\n- name: mock\n  context:\n    cluster: mock\n    user: tidal\n"
            "current-context: mock\n"
        )


@pytest.fixture()
def kube() -> Iterator[KMockThread]:
    server = KMockThread().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def sleeps() -> list[float]:
    return []


@pytest.fixture()
def make_client(kube: KMockThread, sleeps: list[float]) -> Iterator[Callable[..., KubeClient]]:
    """Client over real HTTP to kmock; sleeps are recorded instead of slept (no timed assertions)."""
    clients: list[KubeClient] = []

    def make(**kwargs: Any) -> KubeClient:
        kwargs.setdefault("qps", 1000.0)
        kwargs.setdefault("burst", 1000)
        kwargs.setdefault("backoff", Backoff(base=0.1, cap=2.0, max_retries=3, rand=lambda: 0.5))
        kwargs.setdefault("sleep", sleeps.append)
        client = KubeClient.from_kubeconfig(kube.kubeconfig(), **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture()
def client(make_client: Callable[..., KubeClient]) -> KubeClient:
    return make_client()
