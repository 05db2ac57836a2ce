"""The processes `make chaos` runs and breaks: a private PostgreSQL and Redis (never the shared ones on 5432 and
6379), gunicorn, a Celery worker and beat, two schedulers and the reconciler.

Every process is started here, in a session of its own, and its id kept: a fault kills or restarts only those, and
`close()` stops whatever is left, including the database and Redis, then removes their files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_DATA = Path("/tmp/chaos-pg")
PG_LOG = Path("/tmp/chaos-pg.log")
PG_PORT = 55432
REDIS_PORT = 56379
DATABASE = "tidal_chaos"

# What every process of the stack runs with: production settings (DEBUG off, persistent connections), loops and
# resyncs made short so a fault's recovery takes seconds.
ENV = {
    "DJANGO_SETTINGS_MODULE": "mlplatform.settings",
    "DATABASE_URL": f"postgres://postgres@127.0.0.1:{PG_PORT}/{DATABASE}",
    "REDIS_URL": f"redis://127.0.0.1:{REDIS_PORT}/0",
    "SECRET_KEY": "chaos-only-secret-key-0123456789abcdef0123456789",
    "TIDAL_ENCRYPTION_KEY": "ox_F4AgVyl6_ks-yOTz6zDfulItlbrPk7zVJXniOZ8U=",
    "DEBUG": "0",
    "DATABASE_CONN_MAX_AGE": "60",
    "TIDAL_SSL_REDIRECT": "0",
    "SESSION_COOKIE_SECURE": "0",
    "TIDAL_SCHEDULER_INTERVAL": "1",
    "TIDAL_SIM_START_DELAY": "1",
    "TIDAL_REDISPATCH_AFTER": "8",
    "TIDAL_KUBE_RESYNC_INTERVAL": "5",
    "TIDAL_KUBE_NODE_SYNC_INTERVAL": "10",
    "TIDAL_KUBE_INSTANCE": "chaos",
    "TIDAL_API_THROTTLE_RATE": "100000/min",
    "LOG_LEVEL": "INFO",
}


def _free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def _as_postgres(argv: list[str]) -> list[str]:
    """PostgreSQL's tools refuse to run as root: run them as its own user then."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


class Stack:
    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.processes: dict[str, subprocess.Popen] = {}
        self.redis: subprocess.Popen | None = None
        self.env = {**os.environ, **ENV}
        self.env.pop("PGAPPNAME", None)
        shutil.rmtree(logs, ignore_errors=True)  # this run's logs only
        logs.mkdir(parents=True)

    # ----------------------------------------------------------------------------------------- PostgreSQL

    def start_postgres(self, *, fresh: bool = False) -> None:
        if fresh:
            if not _free(PG_PORT) and not PG_DATA.exists():
                raise SystemExit(f"port {PG_PORT} is taken by a server this script did not start")
            self.stop_postgres(mode="immediate")
            shutil.rmtree(PG_DATA, ignore_errors=True)
            PG_LOG.unlink(missing_ok=True)
            subprocess.run(_as_postgres(["initdb", "-D", str(PG_DATA), "-U", "postgres", "--auth=trust"]),
                           check=True, stdout=subprocess.DEVNULL)
        subprocess.run(_as_postgres(["pg_ctl", "-D", str(PG_DATA), "-o", f"-p {PG_PORT} -k /tmp", "-l", str(PG_LOG),
                                     "-w", "start"]), check=True, stdout=subprocess.DEVNULL)
        if fresh:
            import psycopg

            with psycopg.connect(f"postgres://postgres@127.0.0.1:{PG_PORT}/postgres", autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {DATABASE}")

    def stop_postgres(self, *, mode: str = "fast") -> None:
        """`immediate` is a crash: no shutdown checkpoint, sessions cut, recovery from the WAL at the next start."""
        if (PG_DATA / "postmaster.pid").exists():
            subprocess.run(_as_postgres(["pg_ctl", "-D", str(PG_DATA), "-m", mode, "-w", "stop"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # ---------------------------------------------------------------------------------------------- Redis

    def start_redis(self) -> None:
        if not _free(REDIS_PORT):
            raise SystemExit(f"port {REDIS_PORT} is taken by a server this script did not start")
        log = open(self.logs / "redis.log", "a")  # noqa: SIM115  (closed with the process)
        self.redis = subprocess.Popen(["redis-server", "--port", str(REDIS_PORT), "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no"], stdout=log, stderr=log, start_new_session=True)
        self._wait_port(REDIS_PORT)

    def stop_redis(self) -> None:
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait(10)
        self.redis = None

    # ------------------------------------------------------------------------------------------ the stack

    def manage(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True)

    def start(self, name: str, argv: list[str], **env: str) -> subprocess.Popen:
        """Start `argv` as the process `name` (a Python module or manage.py command line), its output in the
        logs folder."""
        log = open(self.logs / f"{name}.log", "a")  # noqa: SIM115  (closed with the process)
        process = subprocess.Popen(argv, cwd=ROOT, env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        self.processes[name] = process
        return process

    def start_web(self, port: int) -> None:
        self.start("web", [sys.executable, "-m", "gunicorn", "mlplatform.wsgi:application", "--bind",
                           f"127.0.0.1:{port}", "--workers", "1", "--threads", "4"])
        self._wait_port(port)

    def start_worker(self, name: str = "worker") -> None:
        self.start(name, [sys.executable, "-m", "celery", "-A", "mlplatform", "worker", "--concurrency", "2",
                          "--loglevel", "INFO", "--hostname", f"{name}@chaos", "--without-gossip", "--without-mingle"])

    def start_beat(self) -> None:
        self.start("beat", [sys.executable, "-m", "celery", "-A", "mlplatform", "beat", "--loglevel", "INFO",
                            "--schedule", str(self.logs / "beat-schedule")])

    def start_scheduler(self, name: str) -> None:
        """A `run_scheduler`, named to PostgreSQL (application_name) so the leader can be found by its lock."""
        self.start(name, [sys.executable, "manage.py", "run_scheduler", "--interval", "1"], PGAPPNAME=name)

    def start_reconciler(self) -> None:
        self.start("reconciler", [sys.executable, "manage.py", "run_reconciler", "--timeout", "30"])

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal the process `name` and everything it started (a Celery worker's pool: its session's group), then
        reap it; one that outlives a SIGTERM by 15 s is killed."""
        process = self.processes.pop(name)
        self._signal_group(process, sig)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            self._signal_group(process, signal.SIGKILL)
            process.wait(15)

    @staticmethod
    def _signal_group(process: subprocess.Popen, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # the group is gone: nothing of it left to stop
            os.killpg(process.pid, sig)

    def close(self) -> None:
        for name in list(self.processes):
            self.kill(name, signal.SIGTERM)
        self.stop_redis()
        self.stop_postgres(mode="fast")
        shutil.rmtree(PG_DATA, ignore_errors=True)

    @staticmethod
    def _wait_port(port: int, seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while _free(port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on port {port} after {seconds:.0f}s")
            time.sleep(0.1)
