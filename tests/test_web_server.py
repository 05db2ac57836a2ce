"""The web service as deployed: gunicorn started with the project's own configuration (mlplatform/gunicorn.conf.py)
on its own SQLite file, one process. Followed logs cannot starve it: with every stream place of the process taken
(and one caller at its own cap), a plain request still answers at once, the stream one too many is refused with a
429 at once, and every stream ends within its bound with a complete body whose last line resumes it."""

from __future__ import annotations

import http.client
import json
import os
import re
import runpy
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml
from django.conf import settings

from tests.test_e2e_embedded import free_port, manage, serving

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "mlplatform/gunicorn.conf.py"

BOUND = 4  # TIDAL_LOG_FOLLOW_MAX_SECONDS of the server under test
PER_USER, PER_PROCESS = 2, 3
SETUP = """
from clusters.demo import seed_cluster
from jobs.loop import run_once
from jobs.services import job_submit
from quotas.demo import seed_quotas
from quotas.models import ResourceFlavor
from tests.jobs.conftest import spec
from tenancy.demo import seed_tenants
from tenancy.models import Project
from tenancy.services import token_create
from django.contrib.auth.models import User
seed_tenants(); seed_cluster(); seed_quotas()
users = {name: User.objects.get(username=name) for name in ("alice", "bob", "carol", "dave")}
job = job_submit(actor=users["carol"], project=Project.objects.get(slug="vision"),
                 spec=spec(ResourceFlavor.objects.get(name="nvidia-a100-40gb"), devices=1)).job
run_once()
print("job", job.pk)
for name, user in users.items():
    print("token", name, token_create(user=user, name="web")[1])
"""
RESUME = re.compile(r"^# tidal: log stream paused after \d+ s; resume with cursor=(\S+)$")


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    """(base URL, job id, {user: token}) of gunicorn serving a job whose simulated replica runs."""
    folder = tmp_path_factory.mktemp("web")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DEBUG="1", DATABASE_URL=f"sqlite:///{folder / 'web.sqlite3'}", TIDAL_SIM_START_DELAY="3600")
    manage(env, "migrate", "--noinput")
    out = manage(env, "shell", "-c", SETUP)
    job = re.search(r"^job (\d+)$", out, re.M).group(1)
    tokens = dict(re.findall(r"^token (\w+) (\S+)$", out, re.M))
    port = free_port()
    env.update(TIDAL_WEB_WORKERS="1", TIDAL_LOG_FOLLOW_MAX_SECONDS=str(BOUND), TIDAL_LOG_STREAMS_PER_USER=str(PER_USER),
               TIDAL_LOG_STREAMS_PER_PROCESS=str(PER_PROCESS))
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", CONFIG, "--bind",
                               f"127.0.0.1:{port}"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=(folder / "gunicorn.log").open("w"), start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        if not serving(base):
            pytest.fail(f"gunicorn did not start: {(folder / 'gunicorn.log').read_text()[-2000:]}")
        yield base, job, tokens
    finally:
        server.terminate()
        server.wait(timeout=60)


class Follower(threading.Thread):
    """One client following the job's log to the end of the stream: its status, lines, and whether the body ended
    properly (a cut chunked body raises in httpx)."""

    def __init__(self, base: str, job: str, token: str, cursor: str = "") -> None:
        super().__init__()
        self.url = f"{base}/api/v1/jobs/{job}/logs/?follow=true" + (f"&cursor={cursor}" if cursor else "")
        self.token = token
        self.status = 0
        self.lines: list[str] = []
        self.error: Exception | None = None
        self.connected = threading.Event()
        self.seconds = 0.0

    def run(self) -> None:
        started = time.monotonic()
        try:
            with httpx.stream("GET", self.url, headers={"Authorization": f"Bearer {self.token}"},
                              timeout=httpx.Timeout(5, read=BOUND + 10)) as response:
                self.status = response.status_code
                self.connected.set()
                self.lines = list(response.iter_lines())
        except httpx.HTTPError as exc:
            self.error = exc
        finally:
            self.connected.set()
            self.seconds = time.monotonic() - started


def gunicorn_config(monkeypatch, **env: str) -> dict:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(ROOT / CONFIG))


def test_the_image_and_compose_start_gunicorn_with_the_projects_config():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["services"]["web"]["command"].startswith(f"gunicorn -c {CONFIG}")
    assert f'CMD ["gunicorn", "-c", "{CONFIG}"]' in (ROOT / "Dockerfile").read_text()


def test_the_config_keeps_threads_for_requests_and_outlasts_every_stream(monkeypatch):
    """Threaded workers with more threads than a process may stream logs, and a restart that waits for every
    stream; the same defaults as the app's settings."""
    config = gunicorn_config(monkeypatch)
    assert (config["worker_class"], config["workers"], config["threads"], config["keepalive"]) == ("gthread", 4, 8, 75)
    assert config["threads"] > settings.TIDAL["LOG_STREAMS_PER_PROCESS"] == 4
    assert config["graceful_timeout"] > settings.TIDAL["LOG_FOLLOW_MAX_SECONDS"] == 25
    assert gunicorn_config(monkeypatch, TIDAL_LOG_FOLLOW_MAX_SECONDS="100")["graceful_timeout"] == 105
    with pytest.raises(SystemExit, match="TIDAL_LOG_STREAMS_PER_PROCESS \\(8\\) must be below TIDAL_WEB_THREADS"):
        gunicorn_config(monkeypatch, TIDAL_LOG_STREAMS_PER_PROCESS="8")


@pytest.mark.slow
def test_a_connection_kept_alive_outlasts_a_clients_pause(web):
    """gunicorn closed a kept-alive connection after 2 s idle (its default) while clients keep theirs longer
    (httpx 5 s; load balancers 60 s): a request sent as it closed got no answer (the load test's ReadErrors on
    POST /api/v1/jobs/, a proxy's 502). The server now keeps it longer than they do."""
    base, _, _ = web
    connection = http.client.HTTPConnection(base.removeprefix("http://"), timeout=10)
    try:
        for pause in (0, 3):
            time.sleep(pause)
            connection.request("GET", "/healthz")
            response = connection.getresponse()
            assert response.status == 200 and response.read()
    finally:
        connection.close()


@pytest.mark.slow
def test_followers_never_starve_requests_and_every_stream_ends_cleanly_and_resumes(web):
    base, job, tokens = web
    followers = [Follower(base, job, tokens[user]) for user in ("carol", "carol", "dave")]  # the process's places
    for follower in followers:
        follower.start()
        assert follower.connected.wait(10) and follower.status == 200
    over_own_cap = Follower(base, job, tokens["carol"])
    over_process_cap = Follower(base, job, tokens["alice"])
    for refused in (over_own_cap, over_process_cap):
        refused.start()
        refused.join(5)
    plain = httpx.get(f"{base}/api/v1/jobs/{job}/", headers={"Authorization": f"Bearer {tokens['bob']}"}, timeout=5)
    # Refused and answered while every stream place is still taken: a follower's thread lives while its stream is open.
    assert all(follower.is_alive() for follower in followers)
    assert plain.status_code == 200 and not over_own_cap.is_alive() and not over_process_cap.is_alive()
    assert (over_own_cap.status, over_process_cap.status) == (429, 429)
    assert json.loads(over_own_cap.lines[0])["error"]["code"] == "too_many_streams"
    assert json.loads(over_process_cap.lines[0])["error"]["code"] == "streams_busy"

    for follower in followers:
        follower.join(BOUND + 10)
        assert follower.error is None, follower.error  # the chunked body ended properly
        assert follower.seconds < BOUND + 3 and follower.lines[0].startswith("[simulated] cluster")
    cursor = RESUME.match(followers[0].lines[-1]).group(1)
    resumed = Follower(base, job, tokens["carol"], cursor)
    resumed.start()
    resumed.join(BOUND + 10)
    assert resumed.status == 200 and resumed.error is None
    assert resumed.lines[0] == f"[simulated] job {job} attempt 1 replica worker-0 is dispatching."  # not from the start
    assert RESUME.match(resumed.lines[-1])
