"""End to end, as `make run` runs it: the embedded stack (web server, scheduler thread, simulated cluster) in a
subprocess on its own SQLite file; a gang job submitted through the API runs and succeeds."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage(env: dict, *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def serving(base: str, tries: int = 100) -> bool:
    """Whether a server started at `base` answers /healthz within `tries` tries (0.3 s apart)."""
    for _ in range(tries):
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            time.sleep(0.3)
    return False


@pytest.fixture
def embedded_server(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DEBUG="1", DATABASE_URL=f"sqlite:///{tmp_path / 'e2e.sqlite3'}", TIDAL_SIM_START_DELAY="0.5",
               TIDAL_SCHEDULER_INTERVAL="1", PORT=str(free_port()),
               TIDAL_ARTIFACT_URL=(tmp_path / "artifacts").as_uri())  # the demo runs' artifacts, not in var/
    manage(env, "migrate", "--noinput")
    manage(env, "seed_demo", "--without-jobs")
    secret = manage(env, "shell", "-c", "from django.contrib.auth.models import User; "
                    "from tenancy.services import token_create; "
                    "print(token_create(user=User.objects.get(username='carol'), name='e2e')[1])").split()[-1]
    server = subprocess.Popen([sys.executable, "manage.py", "run_embedded", "--port", env["PORT"]], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{env['PORT']}"
    try:
        if not serving(base):
            pytest.fail("the embedded server did not start")
        yield httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"}, timeout=10)
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_gang_job_runs_and_succeeds(embedded_server):
    body = {"project": "vision", "name": "e2e-gang", "image": "ghcr.io/acme/train:1", "command": ["torchrun"],
            "launcher": "pytorch", "duration": 2, "max_runtime": 600,
            "groups": [{"role": "worker", "replicas": 2, "devices": 4, "flavor": "nvidia-a100-40gb"}]}
    response = embedded_server.post("/api/v1/jobs/", json=body)
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    deadline = time.monotonic() + 90
    job = {}
    while time.monotonic() < deadline:
        job = embedded_server.get(f"/api/v1/jobs/{job_id}/").json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.5)
    states = [event["to_state"] for event in job["events"]]
    assert job["state"] == "succeeded", (job["state"], job.get("waiting"), states)
    assert states[-3:] == ["dispatching", "running", "succeeded"] and "admitted" in states
    assert len(job["placement"]) == 2
