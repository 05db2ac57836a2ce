"""`manage.py run_reconciler` stops promptly on SIGTERM/SIGINT, although its watch rounds block for their timeout.

The command runs in a real process (its own SQLite database, a cluster record pointing at kmock) and gets a real
signal while its watch round is open on a silent stream. The bounds are generous: they only keep a broken command
from hanging the suite; the round's own timeout is an hour.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CREATE_CLUSTER = (
    "import os\n"
    "from clusters.models import Cluster\n"
    "cluster = Cluster(name='gpu', backend=Cluster.Backend.KUBERNETES)\n"
    "cluster.set_kubeconfig(os.environ['TEST_KUBECONFIG'])\n"
    "cluster.save()\n"
)


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=True)


def wait_for(condition, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def embedded_env(database: Path, **extra: str) -> dict[str, str]:
    """The command's environment: its own SQLite database, embedded mode (no Redis)."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "PYTHONUNBUFFERED": "1", **extra}
    env.pop("REDIS_URL", None)
    return env


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Path:
    database = tmp_path_factory.mktemp("reconciler") / "migrated.sqlite3"
    manage("migrate", "-v0", env=embedded_env(database))
    return database


@pytest.fixture
def command_env(migrated, tmp_path, kube) -> dict[str, str]:
    """A copy of the migrated database with one Kubernetes cluster, pointing at kmock."""
    database = tmp_path / "reconciler.sqlite3"
    shutil.copyfile(migrated, database)
    env = embedded_env(database, TEST_KUBECONFIG=kube.kubeconfig())
    manage("shell", "-c", CREATE_CLUSTER, env=env)
    return env


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_command_while_its_watch_round_is_open(command_env, kube, sig) -> None:
    process = subprocess.Popen([sys.executable, "manage.py", "run_reconciler", "--timeout", "3600"], cwd=ROOT,
                               env=command_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: len(kube.handler[kube.handler.action.WATCH]) == 1 or process.poll() is not None)
        assert process.poll() is None, process.communicate()
        process.send_signal(sig)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out.splitlines() == ["watching pods on gpu", "stopped"], (out, err)  # no watch thread left behind
    assert len(kube.handler[kube.handler.action.WATCH]) == 1  # closed: no new round was opened
