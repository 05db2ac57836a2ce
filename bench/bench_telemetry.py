"""GPU telemetry ingest: 10,000 GPUs scraped every 15 s with 8 fields, read from a real Prometheus.

    .venv/bin/python bench/bench_telemetry.py [--gpus 10000] [--scrape 15] [--seconds 15] [--interval 15]
                                              [--write-every 60]

A synthetic DCGM exporter (an http.server thread) serves every GPU of --gpus / 8 nodes in dcgm-exporter's text format,
8 fields each (utilization, SM and tensor activity, memory used and free, power, temperature, last Xid: 80,000
series at the default), with the pod, namespace and Hostname labels of one 8-GPU job per node; its values change
every scrape. A real `prometheus` (Debian's package) scrapes it every --scrape seconds into a temporary directory;
the reader (`telemetry.ingest.read_source`, the code beat runs) reads the cluster's source every --interval seconds,
up to now, at the --scrape step, for --seconds, into a temporary SQLite database (or
BENCH_TELEMETRY_DATABASE_URL, PostgreSQL, whose database is dropped and created again).

Printed per read: the window, samples, points written into series, each phase's wall and CPU seconds (query,
parse, attribute, store: the read's `phases`), and the lag of the position (now minus it) and of the series (now
minus the oldest sample staged and not yet written). Then medians, the ingest rate in points/s against the rate the
cluster produces (GPUs x fields / scrape), and the largest lags: bounded when each read takes less than the
interval, so the reader keeps up. Writing a series costs a block and its rollups per GPU and field whatever the
samples in it, so each attempt's points are staged and written every --write-every seconds of samples (the
attempts in turn); --write-every 0 writes every read. The default run is short (`make bench` runs every benchmark:
one or two reads); --seconds 300 to see the reader keep up. Skipped, with a message, without the prometheus binary.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIELDS = (("DCGM_FI_DEV_GPU_UTIL", "gauge"), ("DCGM_FI_PROF_SM_ACTIVE", "gauge"),
          ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"), ("DCGM_FI_DEV_FB_USED", "gauge"),
          ("DCGM_FI_DEV_FB_FREE", "gauge"), ("DCGM_FI_DEV_POWER_USAGE", "gauge"), ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
          ("DCGM_FI_DEV_XID_ERRORS", "gauge"))
GPUS_PER_NODE = 8


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Exporter:
    """Every GPU's label set rendered once; each scrape only writes new values (a function of GPU and scrape)."""

    def __init__(self, pods: list[tuple[str, str, str]]) -> None:  # per node: (node, pod, namespace)
        self.labels: list[str] = []
        self.scrapes = 0
        self.assign(pods)

    def assign(self, pods: list[tuple[str, str, str]]) -> None:
        labels = []
        for node, pod, namespace in pods:
            for gpu in range(GPUS_PER_NODE):
                labels.append(f'gpu="{gpu}",UUID="GPU-{node}-{gpu:02d}",device="nvidia{gpu}",'
                              f'modelName="NVIDIA H100 80GB HBM3",Hostname="{node}",container="main",'
                              f'namespace="{namespace}",pod="{pod}"')
        self.labels = labels

    def render(self) -> bytes:
        self.scrapes += 1
        tick = self.scrapes
        out: list[str] = []
        for metric, kind in FIELDS:
            out.append(f"# TYPE {metric} {kind}")
            for i, labels in enumerate(self.labels):
                wobble = (i * 7 + tick * 13) % 100
                value = {"DCGM_FI_DEV_GPU_UTIL": 90 + wobble % 10, "DCGM_FI_PROF_SM_ACTIVE": 0.3 + wobble / 250,
                         "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.2 + wobble / 400, "DCGM_FI_DEV_FB_USED": 60000 + wobble,
                         "DCGM_FI_DEV_FB_FREE": 21000 - wobble, "DCGM_FI_DEV_POWER_USAGE": 400 + wobble * 2.5,
                         "DCGM_FI_DEV_GPU_TEMP": 55 + wobble % 20, "DCGM_FI_DEV_XID_ERRORS": 0}[metric]
                out.append(f"{metric}{{{labels}}} {value}")
        return ("\n".join(out) + "\n").encode()


def serve(exporter: Exporter) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = exporter.render()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def start_prometheus(directory: Path, target: str, scrape: int) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    config = directory / "prometheus.yml"
    config.write_text(f"global:\n  scrape_interval: {scrape}s\n  scrape_timeout: {max(1, scrape - 1)}s\n"
                      f"scrape_configs:\n  - job_name: dcgm\n    honor_labels: true\n"
                      f"    static_configs:\n      - targets: [\"{target}\"]\n")
    log = open(directory / "prometheus.log", "ab")  # noqa: SIM115
    process = subprocess.Popen([shutil.which("prometheus") or "prometheus", f"--config.file={config}",
                                f"--storage.tsdb.path={directory / 'data'}",
                                f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                               stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("bench_telemetry: prometheus did not become ready in 60 s")


def wait_for_samples(url: str, count: int, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = httpx.get(f"{url}/api/v1/query", params={"query": "count(DCGM_FI_DEV_GPU_UTIL)"}, timeout=10).json()
        result = body["data"]["result"]
        if result and int(float(result[0]["value"][1])) >= count:
            return
        time.sleep(0.5)
    raise SystemExit(f"bench_telemetry: Prometheus did not hold {count} GPUs' samples in {timeout:.0f} s")


def held_at(url: str, moment: int) -> int:
    """How many GPUs' utilization Prometheus answers for at `moment`."""
    import httpx

    body = httpx.get(f"{url}/api/v1/query", params={"query": "count(DCGM_FI_DEV_GPU_UTIL)", "time": str(moment)},
                     timeout=10).json()
    result = body["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0


def setup_django(database_url: str | None, directory: Path) -> None:
    os.environ.update(DJANGO_SETTINGS_MODULE="tests.settings", DEBUG="0")
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-0123456789abcdef0123")
    if database_url:
        import psycopg

        base, _, name = database_url.rpartition("/")
        with psycopg.connect(f"{base}/postgres", autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        os.environ["DATABASE_URL"] = database_url
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{directory / 'bench.sqlite3'}"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def expected_pods(nodes: int, nodes_per_job: int) -> list[tuple[str, str, str]]:
    """What make_world's jobs' pods are named in a new database: job n (from 1) is `llm-<n - 1>`, attempt 1."""
    from clusters.kube.render import replica_pod_name

    return [(f"gpu-{first + i:05d}", replica_pod_name(number + 1, f"llm-{number}", 1, "worker", i), "tidal-train")
            for number, first in enumerate(range(0, nodes, nodes_per_job))
            for i in range(min(nodes_per_job, nodes - first))]


def make_world(nodes: int, nodes_per_job: int) -> tuple[object, list[tuple[str, str, str]]]:
    """A cluster of `nodes` 8-GPU nodes, all held by running jobs of `nodes_per_job` 8-GPU replicas (one a node) of
    one project. The cluster is a simulated one, so the admissions' dispatch claims the attempts without an API
    server (a Kubernetes cluster's would fail them); nothing observes it here, so they stay open. Its exporter names
    the pods as Tidal does on Kubernetes, so attribution is by pod name as there (the namespace is checked only on
    Kubernetes clusters). Returns the cluster and per node (node, pod, namespace)."""
    from datetime import timedelta

    from django.utils import timezone

    from clusters.kube.render import replica_pod_name
    from clusters.models import Cluster, Node
    from jobs.lifecycle import Admission, transition_many
    from jobs.services import job_submit
    from quotas.models import Quota, ResourceFlavor
    from tenancy.models import Membership, Organization, Project, Role
    from tests.conftest import ensure_default_priority_classes, make_user

    ensure_default_priority_classes()
    flavor = ResourceFlavor.objects.create(name="nvidia-h100-80gb", vendor="nvidia", device_resource="nvidia.com/gpu")
    cluster = Cluster.objects.create(name="bench", backend=Cluster.Backend.SIMULATED)
    names = [f"gpu-{i:05d}" for i in range(nodes)]
    Node.objects.bulk_create(Node(cluster=cluster, name=name, flavor=flavor, devices=GPUS_PER_NODE, position=i)
                             for i, name in enumerate(names))
    organization = Organization.objects.create(name="Bench", slug="bench")
    project = Project.objects.create(organization=organization, name="Train", slug="train")
    user = make_user("bench")
    Membership.objects.create(project=project, user=user, role=Role.OWNER)
    Quota.objects.create(project=project, flavor=flavor, guaranteed=nodes * GPUS_PER_NODE, borrow_limit=0)
    pods: list[tuple[str, str, str]] = []
    admissions = []
    for number, first in enumerate(range(0, nodes, nodes_per_job)):
        held = names[first:first + nodes_per_job]
        spec = {"name": f"llm-{number}", "image": "ghcr.io/acme/train:1", "command": ["python", "train.py"],
                "groups": [{"role": "worker", "replicas": len(held), "devices": GPUS_PER_NODE, "flavor": flavor}]}
        job = job_submit(actor=user, project=project, spec=spec).job
        admissions.append(Admission(job.pk, cluster.pk, [{"role": "worker", "index": i, "node": node,
                                                          "devices": GPUS_PER_NODE} for i, node in enumerate(held)]))
        pods += [(node, replica_pod_name(job.pk, job.name, 1, "worker", i), f"tidal-{project.slug}")
                 for i, node in enumerate(held)]
    # Admitted a while ago: the samples Prometheus took while the world was made are within the attempts' lives.
    transition_many(admissions, now=timezone.now() - timedelta(minutes=5))
    return cluster, pods


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=10_000)
    parser.add_argument("--gpus-per-job", type=int, default=256,
                        help="GPUs of each job (a multiple of 8): each job is one run, written as one batch a read")
    parser.add_argument("--scrape", type=int, default=15, help="seconds between scrapes (and the stored step)")
    parser.add_argument("--seconds", type=float, default=15.0, help="how long the reader runs after the first data")
    parser.add_argument("--interval", type=float, default=15.0, help="seconds between reads")
    parser.add_argument("--write-every", type=int, default=60,
                        help="seconds of samples each attempt's points are staged before written into its series "
                             "(TIDAL_TELEMETRY_WRITE_EVERY; 0: every read writes them)")
    args = parser.parse_args()
    if shutil.which("prometheus") is None:
        print("bench_telemetry: skipped, the prometheus binary is not installed (apt-get install prometheus)")
        return 0
    directory = Path(tempfile.mkdtemp(prefix="bench-telemetry-"))
    nodes = max(1, args.gpus // GPUS_PER_NODE)
    try:
        # Prometheus starts first and scrapes the GPUs while the world is made: in a new database the jobs' ids, so
        # their pods' names, are known before (make_world checks it).
        per_job = max(1, args.gpus_per_job // GPUS_PER_NODE)
        exporter = Exporter(expected_pods(nodes, per_job))
        server = serve(exporter)
        process, url = start_prometheus(directory, f"127.0.0.1:{server.server_address[1]}", args.scrape)
        try:
            started = time.perf_counter()
            setup_django(os.environ.get("BENCH_TELEMETRY_DATABASE_URL"), directory)
            cluster, pods = make_world(nodes, per_job)
            if pods != expected_pods(nodes, per_job):
                raise SystemExit("bench_telemetry: the jobs' pods are not named as expected (a database not new?)")
            print(f"world: {nodes:,} nodes x {GPUS_PER_NODE} GPUs held by {-(-nodes // per_job):,} running jobs of "
                  f"{per_job * GPUS_PER_NODE} GPUs (migrations and jobs: {time.perf_counter() - started:.1f} s)")
            return measure(args, cluster, nodes, exporter, url)
        finally:
            process.terminate()
            process.wait(30)
            server.shutdown()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def measure(args: argparse.Namespace, cluster: object, nodes: int, exporter: Exporter, url: str) -> int:
    from datetime import UTC, datetime

    from django.conf import settings
    from django.db.models import Min

    from telemetry import ingest
    from telemetry.models import StagedPoints, TelemetrySource

    wait_for_samples(url, nodes * GPUS_PER_NODE, timeout=max(60.0, 3.0 * args.scrape))
    settings.TIDAL = {**settings.TIDAL, "PROMETHEUS_URL": url, "TELEMETRY_STEP": args.scrape, "TELEMETRY_DELAY": 0,
                      "TELEMETRY_WINDOW": args.scrape * 20, "TELEMETRY_TIMEOUT": 120.0,
                      "TELEMETRY_WRITE_EVERY": args.write_every}
    # The first read is of the latest whole step for which Prometheus holds every GPU's sample (else the next one).
    first = int(time.time()) // args.scrape * args.scrape
    if held_at(url, first) < nodes * GPUS_PER_NODE:
        first += args.scrape
        time.sleep(max(0.0, first - time.time() + 0.5))
    source = TelemetrySource.objects.create(cluster=cluster,
                                            read_through=datetime.fromtimestamp(first - args.scrape, tz=UTC))
    produced = nodes * GPUS_PER_NODE * len(FIELDS) / args.scrape
    print(f"the cluster produces {produced:,.0f} points/s ({nodes * GPUS_PER_NODE:,} GPUs x {len(FIELDS)} fields "
          f"every {args.scrape} s)")
    phases = ("query", "parse", "attribute", "store")
    print(f"reads every {args.interval:g} s; each attempt's points written into its series every {args.write_every} s "
          "of samples. Per read: samples read, points written into series (staged ones with them), each phase's wall "
          "/ CPU seconds (query: Prometheus' answers, their transfer and decoding), the lag of the position and of "
          "the series (now minus the oldest sample staged, not yet in a series)")
    print(f"{'read':>4} {'window':>8} {'samples':>9} {'written':>9} "
          + " ".join(f"{name:>11}" for name in (*phases, "total")) + f" {'points/s':>9} {'lag s':>6} {'series':>6}")
    rows = []
    end = time.monotonic() + args.seconds
    number = 0
    while time.monotonic() < end:
        begun = time.monotonic()
        source.refresh_from_db()
        wall, cpu = time.perf_counter(), time.process_time()
        read = ingest.read_source(source, datetime.now(tz=UTC))
        total_wall, total_cpu = time.perf_counter() - wall, time.process_time() - cpu
        source.refresh_from_db()
        lag = time.time() - source.read_through.timestamp() if source.read_through else float("nan")
        oldest = StagedPoints.objects.aggregate(oldest=Min("first_at"))["oldest"]
        series_lag = time.time() - oldest if oldest is not None else lag
        if read.error:
            print(f"read failed: {read.error}")
            return 1
        if read.window is not None:
            number += 1
            spent = {name: read.phases.get(name, [0.0, 0.0]) for name in phases}
            rate = read.points / total_wall if total_wall else 0.0
            rows.append((read.samples, read.points, spent, total_wall, total_cpu, rate, lag, series_lag))
            print(f"{number:>4} {read.window.end - read.window.start + args.scrape:>6} s {read.samples:>9,} "
                  f"{read.points:>9,} " + " ".join(f"{w:>5.2f}/{c:<5.2f}" for w, c in spent.values())
                  + f" {total_wall:>5.2f}/{total_cpu:<5.2f} {rate:>9,.0f} {lag:>6.1f} {series_lag:>6.1f}")
        time.sleep(max(0.0, args.interval - (time.monotonic() - begun)))
    if not rows:
        print("no window was due: run longer than one scrape interval (--seconds)")
        return 1
    points = sum(r[1] for r in rows)
    busy = sum(r[3] for r in rows)
    print(f"\nmedians over {len(rows)} reads, wall / CPU s: "
          + ", ".join(f"{name} {statistics.median(r[2][name][0] for r in rows):.2f} / "
                      f"{statistics.median(r[2][name][1] for r in rows):.2f}" for name in phases)
          + f", the read {statistics.median(r[3] for r in rows):.2f} / {statistics.median(r[4] for r in rows):.2f}; "
          f"{statistics.median(r[5] for r in rows):,.0f} points/s")
    cpu = sum(r[4] for r in rows)
    print(f"ingest: {points:,} points in {busy:.1f} s of reading = {points / busy:,.0f} points/s, "
          f"{points / busy / produced:.1f}x the {produced:,.0f} points/s the cluster produces; per CPU second of "
          f"this process {points / cpu:,.0f} points/s ({points / cpu / produced:.1f}x: what a machine of its own "
          "would sustain, less Prometheus' and the database's own time)")
    lags = [r[6] for r in rows]
    print(f"lag after each read: max {max(lags):.1f} s, median {statistics.median(lags):.1f} s (now minus the "
          "position; it stays bounded while a read of one interval's samples takes less than the interval); of the "
          f"series: max {max(r[7] for r in rows):.1f} s")
    print(f"exporter scrapes served: {exporter.scrapes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
