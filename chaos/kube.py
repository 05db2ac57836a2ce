"""The fake Kubernetes cluster of `make chaos`: kmock (the tests' API server emulator, whose gate scripts 429s, 500s
and timeouts) behind a TCP proxy that can go down or cut every open connection, and kubelets that run its pods.

The platform's processes (worker, beat, reconciler) reach the API server through the proxy, as they would a real
one; the kubelets write pod status to kmock directly, since what they do is on the cluster's side of the outage.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import urllib3

from clusters.kube import names
from tests.clusters.kube.conftest import KMockThread


class FaultProxy:
    """127.0.0.1:<port> -> the API server. `down()` refuses connections and drops the open ones until `up()`;
    `cut()` drops the open ones once (a watch stream cut); `latency` delays every chunk sent to the server."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.latency = 0.0
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener = self._listen(0)
        self.port = self._listener.getsockname()[1]
        self._serve()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _listen(self, port: int) -> socket.socket:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        return listener

    def _serve(self) -> None:
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by down()
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, server}
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, to_server: bool) -> None:
        try:
            while data := source.recv(65536):
                if to_server and self.latency:
                    time.sleep(self.latency)
                sink.sendall(data)
        except OSError:
            pass
        self._drop(source, sink)

    def _drop(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            with self._lock:
                self._open.discard(sock)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def cut(self) -> int:
        """Drop every open connection; returns how many there were."""
        with self._lock:
            sockets = list(self._open)
        self._drop(*sockets)
        return len(sockets) // 2

    def down(self) -> None:
        self._listener.close()
        self.cut()

    def up(self) -> None:
        self._listener = self._listen(self.port)
        self._serve()


class Kubelet(threading.Thread):
    """Runs the platform's pods: Running shortly after they are created, Succeeded `run_seconds` later, each
    status written through the API server (a PATCH), so watches see it. `paused` holds every pod where it is."""

    def __init__(self, kube: KMockThread, *, run_seconds: float = 3.0, start_seconds: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.kube = kube
        self.run_seconds = run_seconds
        self.start_seconds = start_seconds
        self.paused = threading.Event()
        self._since: dict[tuple[str, str], float] = {}  # pod -> when it entered its current phase
        self._http = urllib3.PoolManager()

    def run(self) -> None:
        while True:
            time.sleep(0.25)
            if not self.paused.is_set():
                self._step()

    def _step(self) -> None:
        now = time.monotonic()
        for (namespace, name), pod in self.kube.objects("pods").items():
            assert namespace is not None, name  # pods are namespaced
            labels = (pod.get("metadata") or {}).get("labels") or {}
            if labels.get(names.LABEL_MANAGED) != "true":
                continue
            phase = (pod.get("status") or {}).get("phase", "Pending")
            since = self._since.setdefault((namespace, name), now)
            if phase == "Pending" and now - since >= self.start_seconds:
                node = pod["metadata"]["annotations"][names.ANNOTATION_NODE]
                self._patch(namespace, name, {"spec": {"nodeName": node}, "status": {
                    "phase": "Running", "containerStatuses": [{"name": "main", "state": {"running": {}}}]}})
                self._since[namespace, name] = now
            elif phase == "Running" and now - since >= self.run_seconds:
                self._patch(namespace, name, {"status": {"phase": "Succeeded", "containerStatuses": [
                    {"name": "main", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}})

    def _patch(self, namespace: str, name: str, body: dict) -> None:
        self._http.request("PATCH", f"{self.kube.url}/api/v1/namespaces/{namespace}/pods/{name}",
                           body=json.dumps(body), headers={"Content-Type": "application/merge-patch+json"})


def node(name: str, rack: str) -> dict:
    """A Ready GPU node as the API server lists it (8 H100s), for node sync."""
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/arch": "amd64",
              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "tidal.dev/rack": rack, "tidal.dev/block": "b1"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {}, "status": {"allocatable": {"cpu": "96", "memory": "1024Gi", "nvidia.com/gpu": "8"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}
