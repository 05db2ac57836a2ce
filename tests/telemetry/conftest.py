"""A real Prometheus (Debian's `prometheus` package) scraping a small DCGM exporter, for the telemetry tests.

The exporter is a plain http.server thread serving a recorded dcgm-exporter scrape (tests/data/telemetry/) in the
exporter's text format; a test sets which node it is on, which pod holds each GPU and any values. Prometheus runs on
a free loopback port with a generated config scraping it every second, in a temporary storage directory, and is
stopped after the test (a test may stop and start it: an outage)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

RECORDING = Path(__file__).parents[1] / "data" / "telemetry" / "dcgm-exporter-a100x8.txt"
LINE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\} (\S+)$')
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
PROMETHEUS = shutil.which("prometheus")
needs_prometheus = pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus binary is not installed "
                                      "(apt-get install prometheus; .ci/run installs it)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Exporter:
    """The recorded scrape, served with the labels and values a test sets."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.series: list[tuple[str, dict[str, str], float]] = []
        self.comments: dict[str, list[str]] = {}
        name = ""
        for line in RECORDING.read_text().splitlines():
            if line.startswith("# HELP") or line.startswith("# TYPE"):
                name = line.split()[2]
                self.comments.setdefault(name, []).append(line)
            elif (match := LINE.match(line)) is not None:
                self.series.append((match.group(1), dict(LABEL.findall(match.group(2))), float(match.group(3))))
        self.values: dict[tuple[str, int], float] = {}  # (metric, gpu) -> value overriding the recording
        self.node = "gpu-node-7"
        self.pods: dict[int, tuple[str, str]] = {}  # gpu -> (pod, namespace); missing: no pod labels
        self.gpus: int | None = None  # serve only GPUs below this index (None: all eight)
        self.drop: set[str] = set()  # metrics not served (an exporter configured without them)

    def set(self, *, node: str | None = None, pods: dict[int, tuple[str, str]] | None = None,
            values: dict[tuple[str, int], float] | None = None) -> None:
        with self.lock:
            if node is not None:
                self.node = node
            if pods is not None:
                self.pods = dict(pods)
            if values is not None:
                self.values.update(values)

    def render(self) -> str:
        with self.lock:
            out: list[str] = []
            done: set[str] = set()
            for metric, labels, value in self.series:
                gpu = int(labels["gpu"])
                if (self.gpus is not None and gpu >= self.gpus) or metric in self.drop:
                    continue
                if metric not in done:
                    out += self.comments.get(metric, [])
                    done.add(metric)
                labels = {k: v for k, v in labels.items() if k not in ("pod", "namespace", "container")}
                labels["Hostname"] = self.node
                if gpu in self.pods:
                    pod, namespace = self.pods[gpu]
                    labels.update(container="main", namespace=namespace, pod=pod)
                text = ",".join(f'{k}="{v}"' for k, v in labels.items())
                out.append(f"{metric}{{{text}}} {self.values.get((metric, gpu), value)}")
            return "\n".join(out) + "\n"


class NodeExporter:
    """node-exporter's infiniband collector on one node: two ports (mlx5_0 and mlx5_1), each transmitting `tx` and
    receiving `rx` bytes a second (the counters are those rates times the clock, so any scrape's rate is exact),
    with fixed error counters; labelled `instance="<node>:9100"`, as Prometheus labels the target."""

    def __init__(self, node: str = "gpu-node-7", tx: float = 2.5e9, rx: float = 1.5e9) -> None:
        self.node, self.tx, self.rx = node, tx, rx

    def render(self) -> str:
        now = time.time()
        out = []
        for name, value in (("node_infiniband_port_data_transmitted_bytes_total", self.tx * now),
                            ("node_infiniband_port_data_received_bytes_total", self.rx * now),
                            ("node_infiniband_port_errors_received_total", 1.0),
                            ("node_infiniband_link_downed_total", 0.0)):
            out.append(f"# TYPE {name} counter")
            out += [f'{name}{{device="{device}",port="1",instance="{self.node}:9100"}} {value:.0f}'
                    for device in ("mlx5_0", "mlx5_1")]
        return "\n".join(out) + "\n"


class _Handler(BaseHTTPRequestHandler):
    exporter: Exporter

    def do_GET(self) -> None:  # noqa: N802
        body = self.server.exporter.render().encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve(exporter: object, port: int = 0) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    server.exporter = exporter  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Prometheus:
    """One prometheus process; stop() and start() again keep its storage (what it held survives, as in an outage
    of the server)."""

    def __init__(self, directory: Path, targets: list[str], *, scrape: str = "1s") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.directory = directory
        self.config = directory / "prometheus.yml"
        listed = ", ".join(f'"{t}"' for t in targets)
        self.config.write_text(
            f"global:\n  scrape_interval: {scrape}\n  scrape_timeout: {scrape}\n"
            f"scrape_configs:\n  - job_name: dcgm\n    honor_labels: true\n"
            f"    static_configs:\n      - targets: [{listed}]\n")
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.log = open(self.directory / "prometheus.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [PROMETHEUS or "prometheus", f"--config.file={self.config}",
             f"--storage.tsdb.path={self.directory / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn"], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(self.directory / 'prometheus.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("prometheus did not become ready in 60 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        self.log.close()

    def count(self, query: str) -> float:
        """The value of an instant query (0 when it is empty)."""
        body = httpx.get(f"{self.url}/api/v1/query", params={"query": query}, timeout=5).json()
        result = body["data"]["result"]
        return float(result[0]["value"][1]) if result else 0.0

    def wait_for_scrapes(self, count: int, metric: str = "DCGM_FI_DEV_GPU_UTIL", timeout: float = 60) -> None:
        """Until Prometheus holds `count` more samples of one GPU's `metric` than it did (in all its series: a label
        that changed starts a new one)."""
        query = f'sum(count_over_time({metric}{{gpu="0"}}[1h]))'
        target = self.count(query) + count
        deadline = time.monotonic() + timeout
        while self.count(query) < target:
            if time.monotonic() > deadline:
                raise AssertionError(f"Prometheus did not scrape {count} more samples in {timeout} s")
            time.sleep(0.2)


@pytest.fixture
def exporter():
    exporter = Exporter()
    server = serve(exporter)
    exporter.address = f"127.0.0.1:{server.server_address[1]}"
    yield exporter
    server.shutdown()
    server.server_close()


@pytest.fixture
def node_exporter():
    exporter = NodeExporter()
    server = serve(exporter)
    exporter.address = f"127.0.0.1:{server.server_address[1]}"
    yield exporter
    server.shutdown()
    server.server_close()


def _prometheus(targets, tmp_path, settings):
    """Prometheus scraping the targets every second; the reader pointed at it, reading at one-second resolution
    up to now, windows of at most 30 s, starting a minute back."""
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is not installed (apt-get install prometheus; .ci/run installs it)")
    server = Prometheus(tmp_path, targets)
    server.start()
    settings.TIDAL = {**settings.TIDAL, "PROMETHEUS_URL": server.url, "TELEMETRY_STEP": 1, "TELEMETRY_DELAY": 0,
                      "TELEMETRY_WINDOW": 30, "TELEMETRY_LOOKBACK": 60, "TELEMETRY_TIMEOUT": 5.0,
                      "TELEMETRY_WRITE_EVERY": 0}
    return server


@pytest.fixture
def prometheus_server(exporter, tmp_path, settings):
    server = _prometheus([exporter.address], tmp_path, settings)
    yield server
    server.stop()


@pytest.fixture
def prometheus_with_nodes(exporter, node_exporter, tmp_path, settings):
    """As prometheus_server, scraping the node's node-exporter too."""
    server = _prometheus([exporter.address, node_exporter.address], tmp_path, settings)
    yield server
    server.stop()


# ------------------------------------------------------------------------------------------ jobs on a GPU node

from tests.jobs.conftest import admit, inventory, submit  # noqa: E402, F401  (fixtures and helpers)


@pytest.fixture
def kube(inventory):  # noqa: F811
    """A Kubernetes cluster with the exporter's node: gpu-node-7, 8 H100s (its Node row; no API server is asked)."""
    from clusters.models import Cluster, Node

    cluster = Cluster.objects.create(name="kube-a", backend=Cluster.Backend.KUBERNETES)
    Node.objects.create(cluster=cluster, name="gpu-node-7", flavor=inventory["h100"], devices=8, rack="r9",
                        position=50)
    return cluster


def pod_of(job, role="worker", index=0, attempt=None) -> str:
    from clusters.kube.render import replica_pod_name

    return replica_pod_name(job.pk, job.name, attempt or job.current_attempt.number, role, index)


def points(job, key: str, attempt: int | None = None) -> dict[int, float]:
    """The stored points of a key of the job's run: step -> value (of one attempt, or the newest per step)."""
    from tracking.models import Series
    from tracking.points import latest, read_blocks

    series = Series.objects.filter(run__job=job, key=key).values_list("pk", flat=True)
    blocks = [b for b in read_blocks(series) if attempt is None or b.attempt == attempt]
    steps, _, values = latest(blocks)
    return dict(zip(steps.tolist(), values.tolist(), strict=True))
