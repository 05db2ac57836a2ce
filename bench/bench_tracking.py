"""Experiment tracking: ingestion through HTTP into PostgreSQL, a downsampled read of a 1,000,000-point series, and
the runs table of an experiment with 5,000 runs.

    .venv/bin/python bench/bench_tracking.py [--seconds 10] [--clients 1 4] [--workers 3]

Targets: ingestion of 10,000-point batches >= 100,000 points/s with one client (more with four); with MLflow's
batches (1,000 metrics), through Tidal's MLflow endpoint, raw and with MLflow's own client (synchronous and async
logging), at least 25x MLflow's server with the same batches; the 1M-point series downsampled to 2,000 points
< 100 ms; the runs table (5,000 runs, 20 params and 5 metrics each) sorted by a metric and filtered by a param or a
tag, and grouped by a param, < 200 ms through the API (its page < 500 ms); the anomaly checks add <= 10% to
ingestion CPU. Uses its own database (`tidal_bench_tracking` on the local
PostgreSQL, or BENCH_TRACKING_DATABASE_URL). Client, gunicorn and PostgreSQL share this machine's cores, so the
figures are a lower bound; CPU per batch of the server and of PostgreSQL is printed beside wall time, and at the end
the web process's CPU for one 1,000-point request through each endpoint, in-process (what waiting on a shared machine
does not change).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stack import (  # noqa: E402
    ROOT,
    free_port,
    manage,
    postgres_cpu_seconds,
    process_cpu_seconds,
    process_group_of,
    raw_request,
    raw_send,
    recreate_database,
    server_env,
    start,
    start_gunicorn,
    stop,
    wait_up,
)

BATCH = 10_000
MLFLOW_BATCH = 1_000  # MLflow's log-batch limit
MLFLOW_ENV = ROOT / "var" / "bench-mlflow"
KEYS = ("train/loss", "train/lr", "train/tokens_per_s", "system/gpu_util", "train/grad_norm")
SETUP = """
import json, random
from django.contrib.auth.models import User
from tenancy.models import Membership, Organization, Project
from tenancy.services import token_create
from tracking import services
from tracking.models import Run
org = Organization.objects.create(name="Bench", slug="bench")
project = Project.objects.create(organization=org, name="Bench", slug="bench")
user = User.objects.create_user("bench", password="bench-password-1")
Membership.objects.create(project=project, user=user, role="owner")
token = token_create(user=user, name="bench")[1]
experiment = services.experiment_get_or_create(project=project, name="ingest")
# A run per client and path: Tidal's endpoint with 10,000-point and with 1,000-point batches, and its MLflow
# endpoint (1,000, MLflow's limit); and runs for MLflow's own client, synchronous and asynchronous.
ingest, ingest_1k, ingest_mlflow = ([services.run_create(project=project, experiment=experiment,
                                                         name=f"ingest-{{kind}}-{{i}}").pk for i in range({clients})]
                                    for kind in ("10k", "1k", "mlflow"))
# A run with one 1,000,000-point series (a spike and a NaN in it), written through the production write path.
long_run = services.run_create(project=project, experiment=experiment, name="long")
for start in range(0, 1_000_000, 10_000):
    services.run_log_batch(run_id=long_run.pk, metrics=[
        {{"key": "train/loss", "value": 2.0 + (i % 97) / 100, "step": i}} for i in range(start, start + 10_000)])
# The runs table: 5,000 runs with 20 params and 5 metrics each (their summaries, as ingestion keeps them).
table = services.experiment_get_or_create(project=project, name="sweep")
rng = random.Random(7)
Run.objects.bulk_create(
    Run(project=project, experiment=table, name=f"sweep-{{i}}", started_at=long_run.started_at,
        params={{f"p{{k}}": str(rng.randrange(10)) for k in range(20)}},
        tags={{"team": rng.choice(["nlp", "cv", "speech", "rl"]), "stage": rng.choice(["sft", "rl"])}},
        summary={{key: {{"last": rng.random(), "step": 1000, "min": 0.0, "max": 1.0}} for key in {keys}}})
    for i in range(5000))
print(json.dumps({{"token": token, "runs": ingest, "runs_1k": ingest_1k, "runs_mlflow": ingest_mlflow,
                  "long": long_run.pk, "table": table.pk}}))
"""


# Ingestion CPU with and without the anomaly checks, batches alternating, in one process (the checks' share): the
# web process's CPU for a whole log-batch request (its body parsed and checked, the tenancy check, the points and
# rollups written, Django and DRF), through the real view with Django's test client. PostgreSQL's CPU, also
# ingestion's, is left out, so the share is if anything overstated.
ANOMALY_SHARE = """
import json, statistics, time
import orjson
from django.test import Client
from tenancy.models import Project
from tracking import alerts, services
project = Project.objects.get(slug="bench")
runs = {{"with": services.run_create(project=project, name="anomaly-on").pk,
        "without": services.run_create(project=project, name="anomaly-off").pk}}
client = Client(HTTP_AUTHORIZATION="Bearer {token}", HTTP_HOST="127.0.0.1")
real = alerts.evaluate_points
LEVELS = {{"train/loss": lambda step: 0.5 + 3.0 * 0.99997 ** step, "train/lr": lambda step: 3e-4,
          "train/tokens_per_s": lambda step: 1e5, "system/gpu_util": lambda step: 90.0,
          "train/grad_norm": lambda step: 1.0}}
cpu = {{"with": [], "without": []}}
for batch in range(64):
    for name in (("with", "without") if batch % 2 else ("without", "with")):
        alerts.evaluate_points = real if name == "with" else (lambda run, points, attempt, **given: [])
        # What training logs: a decaying loss, a flat lr, steady throughput and GPU use, a noisy gradient norm.
        body = orjson.dumps({{"metrics": [
            {{"key": key, "value": LEVELS[key](step) * (1 + ((step * 7919) % 101 - 50) / 2500), "step": step}}
            for key in LEVELS for step in range(batch * 2000, batch * 2000 + 2000)]}})
        started = time.process_time()
        response = client.post(f"/api/v1/runs/{{runs[name]}}/log-batch/", body, content_type="application/json")
        cpu[name].append(time.process_time() - started)
        assert response.status_code == 200, response.content[:300]
alerts.evaluate_points = real
# Each batch with the checks against the one without it beside it: the machine's drift cancels in the pair.
ratios = [on / off for on, off in zip(cpu["with"][4:], cpu["without"][4:], strict=True)]
print(json.dumps({{**{{name: statistics.median(values[4:]) * 1000 for name, values in cpu.items()}},
                  "paired": statistics.median(ratios) - 1}}))
"""


def anomaly_share(env: dict, token: str) -> str:
    out = manage(env, "shell", "-c", ANOMALY_SHARE.format(token=token))
    cpu = json.loads(out.strip().splitlines()[-1])
    share = cpu["paired"]
    return (f"{cpu['without']:>12.1f}{cpu['with']:>12.1f}{share:>10.1%}  "
            f"{'ok' if share <= 0.10 else 'FAIL'}")


# The web process's CPU for one 1,000-point request (MLflow's batch) through each endpoint, in-process with Django's
# test client, the two alternated so both meet the same minutes: what the server spends, without the waiting that the
# throughput rows add on a shared machine.
SAME_BATCH_CPU = """
import json, statistics, time
import orjson
from django.test import Client
from tenancy.models import Project
from tracking import services
project = Project.objects.get(slug="bench")
runs = {{name: services.run_create(project=project, name=f"cpu-{{name}}").pk for name in ("native", "mlflow")}}
client = Client(HTTP_AUTHORIZATION="Bearer {token}", HTTP_HOST="127.0.0.1")
keys = {keys!r}
cpu = {{"native": [], "mlflow": []}}
for batch in range(210):
    metrics = [{{"key": key, "value": 1.0 / (step + 1), "step": step, "timestamp": 1_700_000_000_000 + step}}
               for key in keys for step in range(batch * 200, batch * 200 + 200)]
    for name in (("native", "mlflow") if batch % 2 else ("mlflow", "native")):
        if name == "native":
            path, body = f"/api/v1/runs/{{runs[name]}}/log-batch/", {{"metrics": metrics}}
        else:
            path = "/mlflow/bench/api/2.0/mlflow/runs/log-batch"
            body = {{"run_id": str(runs[name]), "metrics": metrics}}
        encoded = orjson.dumps(body)
        started = time.process_time()
        response = client.post(path, encoded, content_type="application/json")
        cpu[name].append(time.process_time() - started)
        assert response.status_code == 200, response.content[:300]
print(json.dumps({{name: statistics.median(values[10:]) * 1000 for name, values in cpu.items()}}))
"""


def same_batch_cpu(env: dict, token: str) -> str:
    out = manage(env, "shell", "-c", SAME_BATCH_CPU.format(token=token, keys=KEYS))
    cpu = json.loads(out.strip().splitlines()[-1])
    return f"{cpu['native']:>12.1f}{cpu['mlflow']:>12.1f}"


def prepare(env: dict, clients: int) -> dict:
    recreate_database(env["DATABASE_URL"])
    manage(env, "migrate", "-v0")
    out = manage(env, "shell", "-c", SETUP.format(clients=clients, keys=KEYS))
    setup: dict = json.loads(out.strip().splitlines()[-1])
    return setup


@dataclass(frozen=True)
class Ingest:
    """One server's batch endpoint: where a run's batches go and what they look like."""

    port: int
    headers: dict
    path: Callable[[str], str]
    body: Callable[[str, int], bytes]
    points: int  # per batch

    def request(self, run: str, batch_no: int) -> bytes:
        return raw_request("POST", self.path(run), self.port, self.headers, self.body(run, batch_no))


# Bodies are encoded with orjson: the standard encoder holds the interpreter lock for ~20 ms a 10,000-point batch,
# long enough to stall the client's event loop mid-request while it encodes the next batch.
def tidal_path(run: str) -> str:
    return f"/api/v1/runs/{run}/log-batch/"


def mlflow_path(run: str) -> str:
    return "/api/2.0/mlflow/runs/log-batch"


def tidal_batch(run: str, batch_no: int) -> bytes:
    return orjson.dumps({"metrics": points_of(batch_no, BATCH)})


def tidal_batch_1k(run: str, batch_no: int) -> bytes:
    """Tidal's endpoint with MLflow's batch size: the same-batch comparison."""
    return orjson.dumps({"metrics": points_of(batch_no, MLFLOW_BATCH)})


def tidal_mlflow_path(run: str) -> str:
    return "/mlflow/bench/api/2.0/mlflow/runs/log-batch"


def mlflow_batch(run: str, batch_no: int) -> bytes:
    """MLflow's log-batch at its limit of 1,000 metrics a request, the same points."""
    return orjson.dumps({"run_id": run, "metrics": points_of(batch_no, MLFLOW_BATCH)})


def points_of(batch_no: int, size: int) -> list[dict]:
    per_key = size // len(KEYS)
    start = batch_no * per_key
    return [{"key": key, "value": 1.0 / (step + 1), "step": step, "timestamp": 1_700_000_000_000 + step}
            for key in KEYS for step in range(start, start + per_key)]


# Each run's next batch number: a run logged to again (a row with more clients, an interleaved turn) continues its
# series. Sent again at the same steps, a batch takes both servers' path for points already stored: MLflow's ran at
# under half its rate, Tidal's at two thirds, and a row with more clients reused the run of the row before it.
NEXT_BATCH: dict[tuple[int, str], int] = {}


async def client_loop(target: Ingest, run: str, deadline: float, latencies: list[float], errors: list[int],
                      encoder: ProcessPoolExecutor) -> None:
    """One client sending its batches one after the other; each next batch is built and encoded while the last one
    is on its way, as the SDK's background sender does, in a process of its own (in a thread, the encoding would
    hold the interpreter lock and stall the sending)."""
    loop = asyncio.get_running_loop()
    conn: list = []
    batch_no = NEXT_BATCH.get((target.port, run), 0)
    request = target.request(run, batch_no)
    while time.perf_counter() < deadline:
        following = loop.run_in_executor(encoder, target.request, run, batch_no + 1)
        started = time.perf_counter()
        status = await raw_send(target.port, request, conn)
        latencies.append(time.perf_counter() - started)
        if status != 200:
            errors.append(status)
        batch_no += 1
        request = await following
    NEXT_BATCH[target.port, run] = batch_no
    if conn:
        conn[1].close()


def ingest(server: subprocess.Popen, target: Ingest, runs: list[str], seconds: float, label: str,
           target_rate: float | None = None) -> tuple[str, float]:
    """One row: points/s, batch latency, and the CPU per batch of the server's processes and of PostgreSQL."""
    meters = (lambda: process_cpu_seconds(process_group_of(server)), postgres_cpu_seconds)
    before = [meter() for meter in meters]
    latencies: list[float] = []
    errors: list[int] = []
    started = time.perf_counter()

    async def all_clients(encoder: ProcessPoolExecutor) -> None:
        await asyncio.gather(*(client_loop(target, run, started + seconds, latencies, errors, encoder)
                               for run in runs))

    with ProcessPoolExecutor(max_workers=1) as encoder:
        asyncio.run(all_clients(encoder))
    elapsed = time.perf_counter() - started
    after = [meter() for meter in meters]
    server_ms, pg_ms = ((b - a) / max(1, len(latencies)) * 1000 for a, b in zip(before, after, strict=True))
    rate = len(latencies) * target.points / elapsed
    verdict = "" if target_rate is None else ("ok" if rate >= target_rate and not errors else "FAIL")
    p99 = sorted(latencies)[int(len(latencies) * 0.99) - 1] * 1000 if latencies else 0
    return (f"{label:<8}{len(runs):>8}{len(latencies):>9}{rate:>11,.0f}{statistics.median(latencies) * 1000:>9.0f}"
            f"{p99:>9.0f}{len(errors):>7}{server_ms:>9.0f}{pg_ms:>6.0f}  {verdict}"), rate


ROUNDS = 6
ROUND_SECONDS = 3.0
WARM_UP_SECONDS = 0.5


def interleaved_rates(server: subprocess.Popen, tidal: Ingest, tidal_runs: list[str], mlflow: subprocess.Popen,
                      other: Ingest, mlflow_runs: list[str]) -> list[tuple[float, float]]:
    """(Tidal's rate, MLflow's) with the same batches and clients, in rounds where the two take turns (which goes
    first alternates), so both meet the same minutes of a machine whose speed drifts. Each turn starts with an
    unmeasured warm-up, so neither is timed while it wakes up from the other's turn."""
    rounds = []
    for turn in range(ROUNDS):
        sides = [(server, tidal, tidal_runs), (mlflow, other, mlflow_runs)]
        rates = {}
        for process, target, runs in sides if turn % 2 == 0 else sides[::-1]:
            ingest(process, target, runs, WARM_UP_SECONDS, "")
            rates[target.port] = ingest(process, target, runs, ROUND_SECONDS, "")[1]
        rounds.append((rates[tidal.port], max(1.0, rates[other.port])))
    return rounds


# MLflow's own client (the Python package, from Tidal's environment) logging for `seconds`: log_batch with lists of
# MLFLOW_BATCH metrics (what its client sends in one request at most), synchronously, or asynchronously
# (synchronous=False: its queue sends the batches from a pool of threads; the time includes waiting for the queue
# to drain). Points/s, and the client process's CPU per 1,000 points.
CLIENT = """
import json, os, sys, time
from mlflow import MlflowClient
from mlflow.entities import Metric
keys = {keys!r}
client = MlflowClient()
run = client.create_run("0").info.run_id
per_key = {batch} // len(keys)
sent, batch_no, pending = 0, 0, []
cpu, started = time.process_time(), time.perf_counter()
while time.perf_counter() - started < {seconds}:
    metrics = [Metric(key, 1.0 / (step + 1), 1_700_000_000_000 + step, step)
               for key in keys for step in range(batch_no * per_key, (batch_no + 1) * per_key)]
    result = client.log_batch(run, metrics=metrics, synchronous={synchronous!r})
    if result is not None:
        pending.append(result)
        if len(pending) >= 50:  # bounded: the queue would otherwise hold what the server has not taken yet
            pending.pop(0).wait()
    sent += len(metrics)
    batch_no += 1
for operation in pending:
    operation.wait()
elapsed = time.perf_counter() - started
print(json.dumps({{"points": sent, "seconds": elapsed, "cpu_us": (time.process_time() - cpu) / sent * 1e6}}))
"""


def real_client(uri: str, token: str | None, synchronous: bool, seconds: float) -> dict:
    """A new run of the default experiment, logged to by MLflow's client in a process of its own."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
           "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true", "PYTHONPATH": ""}
    if token:
        env["MLFLOW_TRACKING_TOKEN"] = token
    script = CLIENT.format(keys=KEYS, batch=MLFLOW_BATCH, seconds=seconds, synchronous=synchronous)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600,
                          cwd="/")
    if done.returncode:
        raise SystemExit(f"MLflow's client failed against {uri}:\n{done.stderr[-1500:]}")
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def timed(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and best wall milliseconds of `repeat` calls (after the caller's unmeasured warm-up)."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), min(times)


def timed_get(client: httpx.Client, url: str, repeat: int) -> tuple[float, float, int]:
    """Median and best wall milliseconds of `repeat` GETs, after one unmeasured warm-up; and the status."""
    status = client.get(url).status_code
    return (*timed(lambda: client.get(url), repeat), status)


def read_history(client: httpx.Client, url: str) -> int:
    """Every point of a metric's history, page after page as MLflow's client reads it (Tidal answers at most
    25,000 a page); the number of points."""
    points, token = 0, ""
    while True:
        page = client.get(url + (f"&page_token={quote(token)}" if token else "")).json()
        points += len(page.get("metrics", []))
        token = page.get("next_page_token")
        if not token:
            return points


def sign_in(browser: httpx.Client) -> None:
    """A session, as a person gets one: the login form with its CSRF token."""
    form = browser.get("/accounts/login/")
    token = form.cookies.get("csrftoken") or browser.cookies.get("csrftoken")
    response = browser.post("/accounts/login/", data={"username": "bench", "password": "bench-password-1",
                                                      "csrfmiddlewaretoken": token})
    if response.status_code not in (200, 302) or "sessionid" not in browser.cookies:
        raise SystemExit(f"could not sign in to the bench server ({response.status_code})")


def start_mlflow(port: int, workers: int) -> subprocess.Popen | None:
    """MLflow's tracking server on PostgreSQL, from its own environment (var/bench-mlflow, created on first use from
    bench/mlflow-requirements.txt: its dependencies are not Tidal's). None when it cannot be installed here."""
    python = MLFLOW_ENV / "bin" / "python"
    if not python.exists():
        print("installing MLflow's server into var/bench-mlflow (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(MLFLOW_ENV)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", "-r",
                               str(ROOT / "bench" / "mlflow-requirements.txt")], capture_output=True, text=True)
        if done.returncode:
            print(f"MLflow could not be installed, its figures are left out:\n{done.stderr[-500:]}")
            shutil.rmtree(MLFLOW_ENV, ignore_errors=True)
            return None
    recreate_database("postgres://postgres@127.0.0.1:5432/mlflow_bench")
    server = start([str(MLFLOW_ENV / "bin" / "mlflow"), "server", "--backend-store-uri",
                    "postgresql+psycopg2://postgres@127.0.0.1:5432/mlflow_bench", "--host", "127.0.0.1",
                    "--port", str(port), "--workers", str(workers)], dict(os.environ), Path(os.devnull))
    wait_up(f"http://127.0.0.1:{port}/health", seconds=120)
    return server


def mlflow_version() -> str:
    """The version of MLflow's client in Tidal's environment (its distribution may be named otherwise)."""
    done = subprocess.run([sys.executable, "-c", "import mlflow; print(mlflow.__version__)"], capture_output=True,
                          text=True, cwd="/", env={**os.environ, "PYTHONPATH": ""})
    return done.stdout.strip() or "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--without-mlflow", action="store_true", help="leave out MLflow's side-by-side figures")
    args = parser.parse_args()
    port, mlflow_port = free_port(), free_port()
    env = server_env(os.environ.get("BENCH_TRACKING_DATABASE_URL",
                                    "postgres://postgres@127.0.0.1:5432/tidal_bench_tracking"),
                     TIDAL_API_THROTTLE_RATE="10000000/min")
    print("preparing: a 1,000,000-point series and 5,000 runs ...", flush=True)
    setup = prepare(env, max(args.clients))
    server = start_gunicorn(env, port, args.workers)
    mlflow = None
    base, mlflow_base = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{mlflow_port}"
    auth = {"Authorization": f"Bearer {setup['token']}", "Content-Type": "application/json"}
    tidal = Ingest(port, auth, tidal_path, tidal_batch, BATCH)
    try:
        wait_up(f"{base}/healthz")
        mlflow = None if args.without_mlflow else start_mlflow(mlflow_port, args.workers)
        print(f"\nIngestion into PostgreSQL, one run per client ({args.workers} server workers each): Tidal "
              f"{BATCH:,}-point batches, MLflow {MLFLOW_BATCH:,} (its limit);\nCPU is milliseconds per batch of the "
              "server and of PostgreSQL; target: Tidal >= 100,000 points/s with 1 client")
        print(f"{'server':<8}{'clients':>8}{'batches':>9}{'points/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'errors':>7}"
              f"{'server':>9}{'PG':>6}  target")
        runs = [str(r) for r in setup["runs"]]
        ingest(server, tidal, runs[:1], 2, "")  # warm every worker up, unmeasured
        rates: dict[tuple[str, int], float] = {}
        same_batch = {"Tidal 1k": (Ingest(port, auth, tidal_path, tidal_batch_1k, MLFLOW_BATCH), "runs_1k"),
                      "Tidal ML": (Ingest(port, auth, tidal_mlflow_path, mlflow_batch, MLFLOW_BATCH), "runs_mlflow")}
        for clients in args.clients:
            row, rates["Tidal", clients] = ingest(server, tidal, runs[:clients], args.seconds, "Tidal",
                                                  100_000 if clients == 1 else None)
            print(row, flush=True)
            for label, (target, name) in same_batch.items():
                row, rates[label, clients] = ingest(server, target, [str(r) for r in setup[name][:clients]],
                                                    args.seconds, label)
                print(row, flush=True)
        if mlflow is not None:
            mlflow_runs = [httpx.post(f"{mlflow_base}/api/2.0/mlflow/runs/create", json={"experiment_id": "0"},
                                     timeout=120)
                           .json()["run"]["info"]["run_id"] for _ in range(max(args.clients))]
            mlflow_target = Ingest(mlflow_port, {"Content-Type": "application/json"}, mlflow_path, mlflow_batch,
                                   MLFLOW_BATCH)
            for clients in args.clients:
                row, rates["MLflow", clients] = ingest(mlflow, mlflow_target, mlflow_runs[:clients], args.seconds,
                                                       "MLflow")
                print(row, flush=True)
        print("  Tidal: its endpoint, 10,000-point batches; Tidal 1k: its endpoint, 1,000-point batches; Tidal ML: "
              "its MLflow endpoint (runs/log-batch), 1,000")
        if mlflow is not None:
            for clients in args.clients:
                mlflow_rate = max(1.0, rates["MLflow", clients])
                print(f"  {clients} client(s), against MLflow's 1,000-metric batches: Tidal 10,000-point batches "
                      f"{rates['Tidal', clients] / mlflow_rate:.1f}x (not the same batches); the same 1,000-point "
                      f"batches: native {rates['Tidal 1k', clients] / mlflow_rate:.1f}x, through the MLflow "
                      f"endpoint {rates['Tidal ML', clients] / mlflow_rate:.1f}x")
            tidal_ml, _ = same_batch["Tidal ML"]
            print(f"\nThe same 1,000-point batches, interleaved: Tidal's MLflow endpoint and MLflow's server take "
                  f"turns of {ROUND_SECONDS:.0f} s (after {WARM_UP_SECONDS} s unmeasured), {ROUNDS} rounds; the rows "
                  "above run\na minute apart, on a machine whose rate drifts by a third within a minute. Points/s "
                  "(medians of the rounds) and each round's ratio")
            for clients in args.clients:
                rounds = interleaved_rates(server, tidal_ml, [str(r) for r in setup["runs_mlflow"][:clients]],
                                           mlflow, mlflow_target, mlflow_runs[:clients])
                ratios = [mine / theirs for mine, theirs in rounds]
                median = statistics.median(ratios)
                print(f"  {clients} client(s): Tidal {statistics.median(r[0] for r in rounds):,.0f}, MLflow "
                      f"{statistics.median(r[1] for r in rounds):,.0f}; {' '.join(f'{r:.1f}x' for r in ratios)}; "
                      f"median {median:.1f}x (target >= 25x)  {'ok' if median >= 25 else 'FAIL'}", flush=True)
        print(f"\nMLflow's own client (mlflow {mlflow_version()}, one process, log_batch with lists of "
              f"{MLFLOW_BATCH:,} metrics, {args.seconds:.0f} s); client CPU is microseconds per point")
        print(f"{'server':<8}{'logging':<14}{'points':>10}{'points/s':>11}{'client us':>11}")
        client_rates: dict[tuple[str, bool], float] = {}
        servers = [("Tidal", f"{base}/mlflow/bench", setup["token"])]
        if mlflow is not None:
            servers.append(("MLflow", mlflow_base, None))
        for label, uri, token in servers:
            for synchronous in (True, False):
                found = real_client(uri, token, synchronous, args.seconds)
                rate = found["points"] / found["seconds"]
                client_rates[label, synchronous] = rate
                print(f"{label:<8}{'synchronous' if synchronous else 'async':<14}{found['points']:>10,}"
                      f"{rate:>11,.0f}{found['cpu_us']:>11.1f}", flush=True)
        if mlflow is not None:
            for synchronous in (True, False):
                ratio = client_rates["Tidal", synchronous] / max(1.0, client_rates["MLflow", synchronous])
                print(f"  {'synchronous' if synchronous else 'async'}: Tidal / MLflow {ratio:.1f}x (target >= 25x)")
        with httpx.Client(base_url=base, headers=auth, timeout=120) as client:
            print("\nReads through the API (wall ms, median of 10 after a warm-up)")
            print(f"{'read':<64}{'median':>8}{'best':>8}{'target':>8}")
            reads = [
                ("1,000,000-point series -> 2,000 points, extremes kept",
                 f"/api/v1/runs/{setup['long']}/series/?key=train/loss&max_points=2000", 100),
                ("runs table: 5,000 runs, filtered by a param, sorted by a metric",
                 f"/api/v1/runs/?experiment={setup['table']}&param=p3:7&sort=-metric.train/loss", 200),
                ("runs table: 5,000 runs, filtered by a tag, sorted by a metric",
                 f"/api/v1/runs/?experiment={setup['table']}&tag=team:nlp&sort=-metric.train/loss", 200),
                ("runs grouped by a param: 5,000, filtered by a tag, 2 metrics",
                 f"/api/v1/runs/groups/?experiment={setup['table']}&tag=team:nlp&group_by=param.p3"
                 "&metric_key=train/loss&metric_key=train/lr", 200),
            ]
            for label, url, limit in reads:
                median, best, status = timed_get(client, url, 10)
                verdict = "ok" if status == 200 and median < limit else "FAIL"
                print(f"{label:<64}{median:>8.0f}{best:>8.0f}{f'< {limit}':>8}  {verdict}")
            history = (f"/mlflow/bench/api/2.0/mlflow/metrics/get-history?run_id={runs[0]}"
                       "&metric_key=train/loss")
            points = read_history(client, history)
            median, best = timed(lambda: read_history(client, history), 10)
            print(f"{f'full history of the 1-client run, {points:,} points: Tidal':<64}{median:>8.0f}{best:>8.0f}")
            if mlflow is not None:
                with httpx.Client(base_url=mlflow_base, timeout=300) as other:
                    url = (f"/api/2.0/mlflow/metrics/get-history?run_id={mlflow_runs[0]}&metric_key=train/loss"
                           "&max_results=1000000")
                    points = len(other.get(url).json().get("metrics", []))
                    median, best, _ = timed_get(other, url, 10)
                print(f"{f'  the same read in MLflow, {points:,} points':<64}{median:>8.0f}{best:>8.0f}")
        with httpx.Client(base_url=base, timeout=60) as browser:
            sign_in(browser)
            page = f"/experiments/{setup['table']}/?param=p3:7&sort=-metric.train/loss&show=metric.train/loss"
            median, best, status = timed_get(browser, page, 10)
            verdict = "ok" if status == 200 and median < 500 else "FAIL"
            print(f"{'runs table page, same filter and order (HTML)':<64}{median:>8.0f}{best:>8.0f}{'< 500':>8}  "
                  f"{verdict}")
    finally:
        stop(server)
        stop(mlflow)
    print("\nAnomaly checks: ingestion CPU (the web process's CPU ms for a 10,000-point log-batch request, the real "
          "view in-process,\n60 batches alternating with and without; added: the median over pairs of a batch with "
          "the checks against the one without beside it)")
    print(f"{'without':>12}{'with':>12}{'added':>10}  target <= 10%")
    print(anomaly_share(env, setup["token"]))
    print("\nThe same batches' server CPU: the web process's CPU ms for a 1,000-point log-batch request, the real "
          "views in-process,\n200 requests each, the two endpoints alternated (median)")
    print(f"{'native':>12}{'MLflow':>12}")
    print(same_batch_cpu(env, setup["token"]))
    print(f"  {os.cpu_count()} cores shared by the load clients, the servers and PostgreSQL")
    return 0


if __name__ == "__main__":
    sys.exit(main())
