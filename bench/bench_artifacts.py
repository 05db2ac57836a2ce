"""Artifacts through MLflow's own client: a large file logged (the multipart path: parts PUT to the signed part
URLs, spooled, assembled), downloaded (streamed), and logged again in one PUT, with the server's peak memory; and
runs of 10,000 artifacts listed (one folder of 10,000 files; a tree of 100 folders).

    .venv/bin/python bench/bench_artifacts.py [--size-mb 1024] [--files 10000] [--workers 4] [--repeat 20]

Targets: the round trip of a 1 GiB artifact with the server's memory bounded (its peak resident memory, printed
beside its baseline, grows by less than 256 MiB and half the file: no request holds a file whole) and the file back
byte for byte; listing 10,000 artifacts of a run < 200 ms (median, through the endpoint MLflow's client calls).
Exit 1 when one is missed. About a minute by default (3 GiB written to disk). Uses its own database
(`tidal_bench_artifacts` on the local PostgreSQL, or BENCH_ARTIFACTS_DATABASE_URL) and the filesystem store in
var/bench-artifacts (removed after). Client, gunicorn and PostgreSQL share this machine's cores and disk; CPU seconds
of the server are printed beside wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stack import (  # noqa: E402
    ROOT,
    free_port,
    manage,
    process_cpu_seconds,
    process_group_of,
    process_rss_bytes,
    recreate_database,
    server_env,
    start_gunicorn,
    stop,
    wait_up,
)

if TYPE_CHECKING:
    from mlflow import MlflowClient

STORE = ROOT / "var" / "bench-artifacts"
SETUP = """
import json
from django.contrib.auth.models import User
from django.utils import timezone
from tenancy.models import Membership, Organization, Project
from tenancy.services import token_create
from tracking import services
from tracking.artifacts.services import key_of
from tracking.artifacts.store import configured
from tracking.models import Artifact
org = Organization.objects.create(name="Bench", slug="bench")
project = Project.objects.create(organization=org, name="Bench", slug="bench")
user = User.objects.create_user("bench", password="bench-password-1")
Membership.objects.create(project=project, user=user, role="owner")
token = token_create(user=user, name="bench")[1]
experiment = services.experiment_get_or_create(project=project, name="artifacts")
big = services.run_create(project=project, experiment=experiment, name="big")
many = services.run_create(project=project, experiment=experiment, name="many")
flat = services.run_create(project=project, experiment=experiment, name="flat")
# 10,000 artifacts: 100 checkpoints folders of 99 files and 100 files at the root, their rows as uploads write them
# and small files in the store (listing reads the rows only).
paths = [f"checkpoints/step-{{i // 99:03d}}/shard-{{i % 99:02d}}.bin" for i in range({files} - 100)]
paths += [f"eval-{{i:03d}}.json" for i in range(100)]
# And a run of 10,000 files in one folder: the longest answer a listing can give.
now = timezone.now()
root = configured().root
for run, names in ((many, paths), (flat, [f"sample-{{i:05d}}.png" for i in range({files})])):
    Artifact.objects.bulk_create([Artifact(run=run, project=project, path=p, size=64, updated_at=now) for p in names],
                                 batch_size=2000)
    for p in names:
        target = root / key_of(run, p)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"x" * 64)
print(json.dumps({{"token": token, "big": big.pk, "many": many.pk, "flat": flat.pk, "experiment": experiment.pk}}))
"""


class PeakMemory:
    """The server's resident memory (every process of its group, summed), sampled every 20 ms while it runs."""

    def __init__(self, server: subprocess.Popen) -> None:
        self.matches = process_group_of(server)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, process_rss_bytes(self.matches))
            time.sleep(0.02)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def write_file(path: Path, size_mb: int) -> None:
    block = os.urandom(1024 * 1024)
    with path.open("wb") as out:
        for i in range(size_mb):
            out.write(block[:-8] + i.to_bytes(8, "big"))


def single_put(client: MlflowClient, run_id: str, source: Path) -> None:
    """The same file in one PUT, as the client sends files below its multipart threshold (500 MiB)."""
    os.environ["MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD"] = "false"
    try:
        client.log_artifact(run_id, str(source), "single")
    finally:
        del os.environ["MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD"]


def same_file(a: Path, b: Path) -> bool:
    with a.open("rb") as left, b.open("rb") as right:
        while True:
            x, y = left.read(1 << 20), right.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="the large artifact's size in MiB")
    parser.add_argument("--files", type=int, default=10_000, help="artifacts of the listed run")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    shutil.rmtree(STORE, ignore_errors=True)
    STORE.mkdir(parents=True)
    port = free_port()
    env = server_env(os.environ.get("BENCH_ARTIFACTS_DATABASE_URL",
                                    "postgres://postgres@127.0.0.1:5432/tidal_bench_artifacts"),
                     TIDAL_API_THROTTLE_RATE="10000000/min", TIDAL_TRACKING_THROTTLE_RATE="10000000/min",
                     TIDAL_ARTIFACT_URL=(STORE / "store").as_uri())
    print(f"preparing: a run of {args.files:,} artifacts, a {args.size_mb:,} MiB file ...", flush=True)
    recreate_database(env["DATABASE_URL"])
    manage(env, "migrate", "-v0")
    setup = json.loads(manage(env, "shell", "-c", SETUP.format(files=args.files)).strip().splitlines()[-1])
    source = STORE / "model.bin"
    write_file(source, args.size_mb)
    server = start_gunicorn(env, port, args.workers)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_up(f"{base}/healthz")
        # Multipart from 8 MiB on (MLflow's default: from 500 MiB), so a smaller --size-mb takes the same path.
        os.environ.update(MLFLOW_TRACKING_URI=f"{base}/mlflow/bench", MLFLOW_TRACKING_TOKEN=setup["token"],
                          MLFLOW_DISABLE_TELEMETRY="true", MLFLOW_HTTP_REQUEST_TIMEOUT="600",
                          MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE=str(8 * 2**20))
        from mlflow import MlflowClient

        client = MlflowClient()
        group = process_group_of(server)
        client.list_artifacts(str(setup["big"]))  # every worker imported, connections open: unmeasured
        baseline = process_rss_bytes(group)
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
        from mlflow.store.artifact.http_artifact_repo import HttpArtifactRepository

        repository = get_artifact_repository(client.get_run(str(setup["big"])).info.artifact_uri)
        # The client's own decision (a private method of its HTTP repository: what it asks the server-info for).
        # The registry is typed to return the base class; a run's `mlflow-artifacts:/` URI gives its subclass.
        assert isinstance(repository, HttpArtifactRepository)
        multipart = repository._should_multipart_upload(str(source))

        print(f"\nMLflow's client, a {args.size_mb:,} MiB artifact; the server: {args.workers} gunicorn workers, "
              "memory summed over them")
        print(f"{'step':<34}{'wall s':>8}{'MiB/s':>8}{'server CPU s':>14}{'peak RSS MiB':>14}{'baseline':>10}")
        rows = [(f"log_artifact ({'multipart' if multipart else 'ONE PUT'})",
                 lambda: client.log_artifact(str(setup["big"]), str(source), "model")),
                ("download_artifacts (streamed)",
                 lambda: client.download_artifacts(str(setup["big"]), "model/model.bin", str(STORE / "back"))),
                ("log_artifact (one streamed PUT)", lambda: single_put(client, str(setup["big"]), source))]
        (STORE / "back").mkdir()
        peaks = []
        for label, step in rows:
            cpu = process_cpu_seconds(group)
            started = time.perf_counter()
            with PeakMemory(server) as memory:
                step()
            wall = time.perf_counter() - started
            peaks.append(memory.peak)
            print(f"{label:<34}{wall:>8.1f}{args.size_mb / wall:>8.0f}{process_cpu_seconds(group) - cpu:>14.1f}"
                  f"{memory.peak / 2**20:>14.0f}{baseline / 2**20:>10.0f}")
        intact = same_file(source, STORE / "back" / "model.bin")
        growth = (max(peaks) - baseline) / 2**20
        bounded = growth < min(256, args.size_mb / 2)
        missed = [] if intact and bounded else ["the round trip"]
        print(f"  the file came back {'byte for byte' if intact else 'DIFFERENT'}; the server's memory grew by "
              f"{growth:,.0f} MiB at its peak for a {args.size_mb:,} MiB file "
              f"({'bounded' if bounded else 'NOT bounded'}: under 256 MiB and half the file)")

        listing = f"{base}/mlflow/bench/api/2.0/mlflow-artifacts/artifacts"
        root = f"{setup['experiment']}/{setup['many']}/artifacts"
        flat = f"{setup['experiment']}/{setup['flat']}/artifacts"
        headers = {"Authorization": f"Bearer {setup['token']}"}
        print(f"\nListing a run of {args.files:,} artifacts (medians of {args.repeat}; target < 200 ms)")
        print(f"{'what':<44}{'entries':>9}{'p50 ms':>9}{'best ms':>9}{'server CPU ms':>15}  target")
        with httpx.Client(headers=headers, timeout=60) as http:
            for label, params in [(f"one folder of {args.files:,} files", {"path": flat}),
                                  ("the root (100 files, 1 folder)", {"path": root}),
                                  ("checkpoints/ (folders of 99 files)", {"path": f"{root}/checkpoints"}),
                                  ("a folder of 99 files", {"path": f"{root}/checkpoints/step-000"})]:
                entries = len(http.get(listing, params=params).json()["files"])
                times, cpu = [], process_cpu_seconds(group)
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    http.get(listing, params=params).raise_for_status()
                    times.append((time.perf_counter() - started) * 1000)
                cpu_ms = (process_cpu_seconds(group) - cpu) / args.repeat * 1000
                p50 = statistics.median(times)
                if p50 >= 200:
                    missed.append(label)
                print(f"{label:<44}{entries:>9,}{p50:>9.1f}{min(times):>9.1f}{cpu_ms:>15.1f}  "
                      f"{'ok' if p50 < 200 else 'MISSED'}")
        times = []
        for _ in range(max(3, args.repeat // 4)):
            started = time.perf_counter()
            found = client.list_artifacts(str(setup["many"]), "checkpoints")
            times.append((time.perf_counter() - started) * 1000)
        print(f"{'MlflowClient.list_artifacts(checkpoints)':<44}{len(found):>9,}{statistics.median(times):>9.1f}"
              f"{min(times):>9.1f}{'':>15}  (the client's own work included)")
    finally:
        stop(server)
        shutil.rmtree(STORE, ignore_errors=True)
    print(f"  {os.cpu_count()} cores shared by the client, gunicorn and PostgreSQL")
    if missed:
        print(f"MISSED: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
