"""The `tidal` SDK against a real server (pytest-django's `live_server`): what it logs arrives exactly once, through
an outage (spool), a refused batch, a hanging server, other ranks and SIGTERM.

Intervals, grace and backoff are tiny here (FAST); the only time bounds are generous ones ("does not block")."""

from __future__ import annotations

import json
import math
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from contextlib import suppress
from urllib.parse import urlsplit

import pytest
import tidal

from jobs.lifecycle import AttemptEnd, transition
from jobs.states import State
from tenancy.services import token_create
from tests.jobs.conftest import admit, inventory, submit  # noqa: F401  (fixtures)
from tests.tracking.conftest import next_attempt
from tracking import services
from tracking.models import Run
from tracking.points import stored_points
from tracking.tokens import run_token

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"flush_interval": 0.05, "grace": 0.3, "backoff": 0.05, "max_backoff": 0.2, "timeout": 5.0,
        "exit_deadline": 10.0, "system_interval": 0}


@pytest.fixture(autouse=True)
def sdk_env(monkeypatch, tmp_path):
    """No config file, no job or rank variables, a spool of the test's own; no run left open afterwards."""
    for name in ("TIDAL_URL", "TIDAL_TOKEN", "TIDAL_PROJECT", "TIDAL_RUN_ID", "TIDAL_RUN_TOKEN", "TIDAL_ATTEMPT",
                 "TIDAL_JOB_ID", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TIDAL_CONFIG", str(tmp_path / "no-config.json"))
    monkeypatch.setenv("TIDAL_SPOOL_DIR", str(tmp_path / "spool"))
    yield tmp_path / "spool"
    tidal._finish_all(None, 2.0)
    tidal._current = None


@pytest.fixture
def token(tenant) -> str:
    return token_create(user=tenant.users["member"], name="sdk")[1]


@pytest.fixture
def user_run(tenant):
    experiment = services.experiment_get_or_create(project=tenant.project, name="sweep")
    return services.run_create(project=tenant.project, experiment=experiment, name="sdk", user=tenant.users["member"],
                               params={"lr": "0.0003"})


@pytest.fixture
def job(tenant, inventory):  # noqa: F811
    """A job admitted once: its run exists and its attempt 1 is open."""
    return admit(submit(tenant, inventory["h100"]), inventory["cluster"], ["r1-n1"])


def job_env(monkeypatch, url: str, job, attempt: int) -> Run:
    """What the job's attempt's process gets (tracking.env); returns the job's run."""
    run = Run.objects.get(job=job)
    for name, value in {"TIDAL_URL": url, "TIDAL_RUN_ID": str(run.pk), "TIDAL_RUN_TOKEN": run_token(run.pk, attempt),
                        "TIDAL_ATTEMPT": str(attempt), "TIDAL_JOB_ID": str(job.pk)}.items():
        monkeypatch.setenv(name, value)
    return run


def counts(run_id: int) -> Counter:
    """How many points the server holds per (key, step)."""
    return Counter((p.key, p.step) for p in stored_points(run_id))


def spooled(directory) -> list[dict]:
    return [json.loads(line) for path in sorted(directory.glob("*")) for line in path.read_text().splitlines()]


class Forwarder:
    """A TCP front of the live server: while down it closes every connection at once, while up it forwards."""

    def __init__(self, target_url: str) -> None:
        parts = urlsplit(target_url)
        self.target = (parts.hostname, parts.port)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.up = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with suppress(OSError):
                    end.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def forwarder(live_server):
    front = Forwarder(live_server.url)
    yield front
    front.close()


def test_init_log_finish_writes_exactly_the_points(live_server, tenant, token, monkeypatch):
    monkeypatch.setenv("TIDAL_URL", live_server.url)  # the CLI's variables are the SDK's too
    monkeypatch.setenv("TIDAL_TOKEN", token)
    run = tidal.init(project="vision", experiment="sweep", name="lr-3e-4", params={"lr": 3e-4, "layers": 2},
                     tags={"git": "abc123"}, **FAST)
    for step in range(0, 500, 10):
        tidal.log({"loss": 1 / (step + 1), "lr": 3e-4}, step=step)
    tidal.log({"loss": float("nan"), "grad_norm": float("inf")})  # step 491: one after the last
    tidal.log({"loss": 0.5})  # 492
    tidal.log({"bad value": "high", "": 1.0, "ok": 1})  # only `ok` is logged
    tidal.log_tags({"stage": "sft"})
    tidal.finish()

    stored = Run.objects.get(pk=run.id)
    assert (stored.status, stored.name, stored.experiment.name) == ("FINISHED", "lr-3e-4", "sweep")
    assert stored.params == {"lr": "0.0003", "layers": "2"}
    assert stored.tags["git"] == "abc123" and stored.tags["stage"] == "sft"
    expected = {("loss", s) for s in range(0, 500, 10)} | {("lr", s) for s in range(0, 500, 10)}
    expected |= {("loss", 491), ("grad_norm", 491), ("loss", 492), ("ok", 493)}
    assert counts(run.id) == Counter(expected)
    values = {p.key: p.value for p in sorted(stored_points(run.id), key=lambda p: p.step) if p.step > 490}
    assert values["grad_norm"] == float("inf") and values["loss"] == 0.5
    assert [math.isnan(p.value) for p in stored_points(run.id) if p.key == "loss" and p.step == 491] == [True]


def test_an_outage_spools_and_the_next_contact_sends_every_point_once(live_server, forwarder, user_run, token,
                                                                      sdk_env):
    run = tidal.init(run_id=user_run.pk, url=forwarder.url, token=token, **FAST)
    for step in range(300):
        run.log({"loss": step / 100, "acc": 1 - step / 1000}, step=step)
    assert run.flush(timeout=30)  # the server is away past the grace period: everything went to the spool
    assert not stored_points(user_run.pk)
    assert sum(len(r["body"]["metrics"]) for r in spooled(sdk_env)) == 600

    forwarder.up = True
    for step in range(300, 400):
        run.log({"loss": step / 100, "acc": 1 - step / 1000}, step=step)
    assert run.flush(timeout=30)  # a successful send, then the spool
    run.finish()
    assert counts(user_run.pk) == Counter({(key, step): 1 for key in ("loss", "acc") for step in range(400)})
    assert list(sdk_env.glob("*")) == []
    assert Run.objects.get(pk=user_run.pk).status == "FINISHED"


def test_what_an_earlier_process_spooled_is_sent_at_the_next_init(live_server, forwarder, user_run, token, sdk_env):
    first = tidal.init(run_id=user_run.pk, url=forwarder.url, token=token, **FAST)
    for step in range(100):
        first.log({"loss": step}, step=step)
    first.finish(status="FINISHED")  # the status waits in the spool after the points
    records = spooled(sdk_env)
    assert records[-1] == {"kind": "status", "status": "FINISHED"}
    assert Run.objects.get(pk=user_run.pk).status == "RUNNING"

    forwarder.up = True
    second = tidal.init(run_id=user_run.pk, url=forwarder.url, token=token, **FAST)
    second.finish(status=None)
    assert counts(user_run.pk) == Counter({("loss", step): 1 for step in range(100)})
    assert Run.objects.get(pk=user_run.pk).status == "FINISHED"
    assert list(sdk_env.glob("*")) == []


def test_a_refused_batch_is_dropped_and_later_ones_arrive(live_server, user_run, token, caplog):
    run = tidal.init(run_id=user_run.pk, url=live_server.url, token=token, **FAST)
    run.log_params({"lr": "0.1"})  # the run has lr=0.0003: params never change, the server refuses it
    run._sender.add_points([{"key": "loss", "value": 1.0, "step": -1, "timestamp": 0}])  # past log()'s checks
    assert run.flush(timeout=30)
    for step in range(5):
        run.log({"loss": step}, step=step)
    run.finish()
    assert counts(user_run.pk) == Counter({("loss", step): 1 for step in range(5)})
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 2 and "params.lr" in refusals[0] and "HTTP 400" in refusals[1]
    assert Run.objects.get(pk=user_run.pk).params == {"lr": "0.0003"}


def test_log_never_waits_for_a_hanging_server(user_run, token, sdk_env):
    """A server that accepts connections and never answers: log() returns at once, a full queue spills to the
    spool, and finish() keeps what was not sent when its deadline passes."""
    with socket.socket() as hanging:
        hanging.bind(("127.0.0.1", 0))
        hanging.listen(8)
        url = f"http://127.0.0.1:{hanging.getsockname()[1]}"
        run = tidal.init(run_id=user_run.pk, url=url, token=token,
                         **{**FAST, "timeout": 60.0, "grace": 60.0, "max_queue": 1000, "batch_size": 200})
        started = time.monotonic()
        for step in range(5000):
            run.log({"loss": step * 0.1, "lr": 1e-4}, step=step)
        assert time.monotonic() - started < 20  # a blocking send would wait 60 s
        run.finish(timeout=0.5)
        # Read while the server still hangs: once it closes, the sender's request fails and it puts back what it
        # had claimed from the spool, moving files under a reader (test_spool_order.py checks that order).
        records = spooled(sdk_env)
    assert records[-1] == {"kind": "status", "status": "FINISHED"}  # sent after the points, when they are
    points = Counter((p["key"], p["step"]) for r in records[:-1] for p in r["body"]["metrics"])
    assert points == Counter({(key, step): 1 for key in ("loss", "lr") for step in range(5000)})


def test_only_rank_zero_logs_unless_all_ranks(live_server, tenant, token, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    run = tidal.init(project="vision", url=live_server.url, token=token, **FAST)
    assert isinstance(run, tidal.NoOpRun)
    tidal.log({"loss": 1.0}, step=1)
    tidal.finish()
    assert not Run.objects.exists()
    monkeypatch.delenv("RANK")
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert isinstance(tidal.init(project="vision", url=live_server.url, token=token, **FAST), tidal.NoOpRun)
    everyone = tidal.init(project="vision", url=live_server.url, token=token, all_ranks=True, **FAST)
    everyone.log({"loss": 1.0}, step=1)
    everyone.finish()
    assert counts(everyone.id) == Counter({("loss", 1): 1})


def test_system_metrics_are_logged_under_system(live_server, user_run, token):
    run = tidal.init(run_id=user_run.pk, url=live_server.url, token=token, **{**FAST, "system_interval": 0.05})
    deadline = time.monotonic() + 20
    while not any(p.key == "system/cpu_percent" for p in stored_points(user_run.pk)):
        assert time.monotonic() < deadline, "no system metrics arrived"
        run.flush(timeout=5)
        time.sleep(0.05)
    run.finish()
    keys = {p.key for p in stored_points(user_run.pk)}
    assert {"system/cpu_percent", "system/memory_percent", "system/disk_percent"} <= keys
    assert all(key.startswith("system/") for key in keys)


def test_a_process_of_an_ended_attempt_stops_sending(live_server, job, monkeypatch, caplog):
    """A process left running after its attempt ended (a partitioned node, a victim in its grace): its token is
    refused, and the SDK sends nothing more instead of retrying or dropping batch after batch."""
    run = job_env(monkeypatch, live_server.url, job, 1)
    tidal.init(**FAST)
    tidal.log({"loss": 1.0}, step=0)
    assert tidal.flush(timeout=30)
    transition(job, State.PREEMPTED, reason="preempted", actor="scheduler", end=AttemptEnd(reason="preempted"))
    for step in range(1, 4):
        tidal.log({"loss": 1.0}, step=step)
        assert tidal.flush(timeout=30)
    assert counts(run.pk) == Counter({("loss", 0): 1})
    ended = [r.getMessage() for r in caplog.records if "takes no more data" in r.getMessage()]
    assert len(ended) == 1 and "attempt 1's" in ended[0]


def test_a_job_reports_its_checkpoint_and_the_next_attempt_resumes_from_it(live_server, job, monkeypatch, caplog):
    from jobs import ports

    job_env(monkeypatch, live_server.url, job, 1)
    assert tidal.checkpoint("s3://ckpt/train/1000", step=1000, **FAST) is True
    next_attempt(job)
    job.refresh_from_db()
    env = ports.env_for(job.current_attempt).plain
    assert (env["TIDAL_RESUME_FROM"], env["TIDAL_RESUME_STEP"]) == ("s3://ckpt/train/1000", "1000")
    # attempt 1's process is still running somewhere: its report is refused, and says why
    assert tidal.checkpoint("s3://ckpt/train/stale", **FAST) is False
    assert any("HTTP 401" in r.getMessage() and "has ended" in r.getMessage() for r in caplog.records)
    job_env(monkeypatch, live_server.url, job, 2)
    monkeypatch.setenv("RANK", "1")
    assert tidal.checkpoint("s3://ckpt/train/rank1", **FAST) is False  # only rank 0 reports
    assert job.attempts.get(number=2).checkpoint == ""


def test_a_checkpoint_outside_a_job_reports_nothing(caplog):
    assert tidal.checkpoint("/tmp/ckpt") is False  # noqa: S108
    assert any("outside one nothing is reported" in r.getMessage() for r in caplog.records)


def test_a_job_process_killed_by_sigterm_flushes_its_points_first(live_server, job, tmp_path):
    """Inside a job (the env a job's process gets): init() with no arguments continues the job's run with its run
    token; SIGTERM flushes, then the default action kills the process."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import os, signal, time
        import tidal
        tidal.init(system_interval=0, flush_interval=60)  # nothing is sent before the signal
        for step in range(2000):
            tidal.log({"loss": 1.0 / (step + 1)}, step=step)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
        print("still alive")
    """))
    assert next_attempt(job) == 2
    run = Run.objects.get(job=job)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TIDAL_URL": live_server.url,
           "TIDAL_RUN_ID": str(run.pk), "TIDAL_RUN_TOKEN": run_token(run.pk, 2), "TIDAL_ATTEMPT": "2",
           "TIDAL_SPOOL_DIR": str(tmp_path / "spool"), "TIDAL_CONFIG": str(tmp_path / "none.json")}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert "still alive" not in done.stdout
    assert counts(run.pk) == Counter({("loss", step): 1 for step in range(2000)})
    assert {p.attempt for p in stored_points(run.pk)} == {2}
    assert Run.objects.get(pk=run.pk).status == "RUNNING"  # a job's run ends with the job
