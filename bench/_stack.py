"""What the benchmarks that run Tidal's own processes share: a scratch PostgreSQL database, `manage.py` commands,
gunicorn and other services started in sessions of their own (so a whole process tree is measured and stopped
together), and the CPU seconds and memory of those trees read from /proc.

Not a benchmark itself (the Makefile's loop runs bench/bench_*.py only).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
BENCH_SECRET_KEY = "bench-only-secret-key-0123456789abcdef0123"

Matcher = Callable[[int, int, str], bool]  # (pid, parent pid, command name) -> is it one of ours


def server_env(database_url: str, **settings: str) -> dict:
    """The environment of Tidal's processes as deployed on `database_url`: this process's, production's settings on
    plain HTTP with throwaway keys (tests.settings), warnings only, `settings` on top. Without Redis unless `settings`
    names one, and with production's persistent PostgreSQL connections: `make bench` runs with the test suite's
    environment, whose DATABASE_CONN_MAX_AGE=0 would make every request open a connection (three times
    PostgreSQL's CPU of a tracking batch)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_CONN_MAX_AGE", "REDIS_URL")}
    env.update(DATABASE_URL=database_url, SECRET_KEY=BENCH_SECRET_KEY, DEBUG="0",
               DJANGO_SETTINGS_MODULE="tests.settings", LOG_LEVEL="WARNING", **settings)
    return env


def recreate_database(url: str) -> None:
    """Drop and create the database `url` names, on its server (connecting to its `postgres` database)."""
    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def manage(env: dict, *args: str) -> str:
    """Run `manage.py <args>` with `env`; returns its standard output (raises with its output when it fails)."""
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"manage.py {' '.join(args)[:80]} failed ({done.returncode}):\n{done.stdout[-2000:]}"
                         f"{done.stderr[-2000:]}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_up(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up within {seconds:.0f} s")


def start(command: list[str], env: dict, log: Path | None = None) -> subprocess.Popen:
    """A service in a session of its own: its pid is its process group, which holds every process it forks."""
    out = open(log, "ab") if log is not None else None  # noqa: SIM115 (the child keeps it; closed with the child)
    try:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT if out else None,
                                start_new_session=True)
    finally:
        if out is not None:
            out.close()


def start_gunicorn(env: dict, port: int, workers: int, log: Path | None = None) -> subprocess.Popen:
    """The web service as production runs it (mlplatform/gunicorn.conf.py: threaded workers, which keep a client's
    connection alive between requests), on a local port with `workers` processes."""
    return start([sys.executable, "-m", "gunicorn", "-c", str(ROOT / "mlplatform" / "gunicorn.conf.py"), "--bind",
                  f"127.0.0.1:{port}", "--workers", str(workers), "--log-level", "warning"], env, log)


def stop(service: subprocess.Popen | None, timeout: float = 30) -> int | None:
    """SIGTERM to the service's main process, as a deployment stops it: gunicorn's master and Celery's main process
    then stop their own workers, letting what runs finish (a SIGTERM sent to each of Celery's pool processes as well
    loses their tasks, and the main process logs each as an error). Then SIGKILL to whatever of its process group is
    left, at once once it exited, after `timeout` when it does not."""
    if service is None:
        return None
    service.send_signal(signal.SIGTERM)
    try:
        code = service.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(service.pid, signal.SIGKILL)
    return code if code is not None else service.wait()


def _proc_stats() -> list[tuple[int, int, str, list[str]]]:
    """(pid, parent pid, name, the fields after the name) of every live process."""
    stats = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, rest = stat.read_text().split(" (", 1)
        except OSError:  # gone meanwhile
            continue
        name, fields = rest.rsplit(") ", 1)
        values = fields.split()
        stats.append((int(pid), int(values[1]), name, values))
    return stats


def process_cpu_seconds(matches: Matcher) -> float:
    """CPU seconds (user + system) of the live processes `matches(pid, ppid, name)` accepts, read from /proc."""
    total = sum(int(values[11]) + int(values[12]) for pid, ppid, name, values in _proc_stats()
                if matches(pid, ppid, name))
    return total / os.sysconf("SC_CLK_TCK")


def process_rss_bytes(matches: Matcher) -> int:
    """Resident memory of the processes `matches` accepts, summed (pages shared between them count once each)."""
    return sum(int(values[21]) for pid, ppid, name, values in _proc_stats()
               if matches(pid, ppid, name)) * os.sysconf("SC_PAGE_SIZE")


def machine_busy_seconds() -> float:
    user, nice, system, idle, iowait, *_ = (int(v) for v in Path("/proc/stat").read_text().split()[1:8])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def postgres_process(pid: int, ppid: int, name: str) -> bool:
    return name.startswith("postgres")


def postgres_cpu_seconds() -> float:
    """PostgreSQL's CPU seconds: its live processes, plus what its backends that exited (a client disconnecting)
    spent, which the kernel adds to their parent's children times."""
    stats = _proc_stats()
    names = {pid: name for pid, _, name, _ in stats}
    total = 0
    for _, ppid, name, values in stats:
        if name.startswith("postgres"):
            total += int(values[11]) + int(values[12])
            if not names.get(ppid, "").startswith("postgres"):  # the postmaster: its exited children's times
                total += int(values[13]) + int(values[14])
    return total / os.sysconf("SC_CLK_TCK")


def process_group_of(service: subprocess.Popen) -> Matcher:
    """The service's processes, however deep it forks its workers (started in a session of its own)."""
    def matches(pid: int, ppid: int, name: str) -> bool:
        try:
            return os.getpgid(pid) == service.pid
        except OSError:  # gone meanwhile
            return False
    return matches


# The load clients share the server's two cores: raw HTTP/1.1 on asyncio streams costs them a few microseconds a
# request where a full client library costs about a millisecond, so the cores go to the server being measured.
def raw_request(method: str, path: str, port: int, headers: dict[str, str], body: bytes = b"") -> bytes:
    """One HTTP/1.1 request as bytes, ready to send again and again."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *(f"{k}: {v}" for k, v in headers.items()),
             f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def raw_send(port: int, request: bytes, conn: list) -> int:
    """One request on a kept-alive connection (reopened when the server closes it); returns the status code."""
    if not conn:
        conn.extend(await asyncio.open_connection("127.0.0.1", port))
    reader, writer = conn
    writer.write(request)
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
    length = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0])
    await reader.readexactly(length)
    if "connection: close" in head:
        writer.close()
        conn.clear()
    return int(head.split(" ", 2)[1])
