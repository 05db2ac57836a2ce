"""The CLI against a real server: `live_server`, the shared tenant fixtures, and the demo's flavors, cluster and
quotas. `cli("jobs", "--json")` runs `tidal` in-process and returns its exit code, stdout and stderr."""

from __future__ import annotations

import json
import logging
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest
from tidal_cli.main import main

from clusters.demo import seed_cluster
from quotas.demo import seed_quotas
from quotas.models import PriorityClass
from tenancy.services import token_create
from tests.clusters.conftest import _fresh_clients, kube, kube_inventory  # noqa: F401  (a cluster on kmock: tidal logs)

EXAMPLES = Path(__file__).resolve().parents[2] / "sdk" / "examples"
# The data migration's priority classes: a transactional test flushes them, so they are put back per test.
PRIORITY_CLASSES = [("high", 1000, False, False), ("normal", 500, False, True), ("low", 100, False, False),
                    ("preemptible", 0, True, False)]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def demo_cluster(tenant):
    """The demo seed's flavors, nodes (4+4 H100, 4+2 A100, 2 Ascend nodes of 8) and quotas (vision: H100 16
    guaranteed + 16 borrowable, A100 32 + 16)."""
    for name, value, preemptible, is_default in PRIORITY_CLASSES:
        PriorityClass.objects.get_or_create(name=name, defaults={
            "value": value, "preemptible": preemptible, "is_default": is_default})
    cluster = seed_cluster()
    seed_quotas()
    return cluster


@pytest.fixture
def tokens(tenant) -> dict[str, str]:
    return {name: token_create(user=user, name="cli")[1] for name, user in tenant.users.items()}


@pytest.fixture
def cli(live_server, demo_cluster, tokens, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("TIDAL_CONFIG", str(tmp_path / "tidal" / "config.json"))
    monkeypatch.delenv("TIDAL_PROJECT", raising=False)
    # The project's logging config sends httpx's request log to stderr; a real `tidal` run does not configure it.
    httpx_logger = logging.getLogger("httpx")
    monkeypatch.setattr(httpx_logger, "level", logging.WARNING)

    def run(*argv: str, user: str = "member", token: str | None = None, url: str | None = None) -> Result:
        monkeypatch.setenv("TIDAL_URL", url or live_server.url)
        monkeypatch.setenv("TIDAL_TOKEN", token or tokens[user])
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def job_file(tmp_path):
    """Write a job file: `job_file(flavor="nvidia-a100-40gb")` or `job_file(text="...")`."""

    def write(text: str | None = None, *, name: str = "train", flavor: str = "nvidia-h100-80gb", replicas: int = 2,
              devices: int = 8, extra: str = "", filename: str = "job.yaml") -> Path:
        path = tmp_path / filename
        path.write_text(text if text is not None else (
            f"name: {name}\n"
            "image: pytorch/pytorch:2.3.0\n"
            "command: [python, train.py]\n"
            "groups:\n"
            "  - role: worker\n"
            f"    replicas: {replicas}\n"
            f"    devices: {devices}\n"
            f"    flavor: {flavor}\n"
            "max_runtime: 3600\n" + extra))
        return path

    return write


@pytest.fixture
def closed_port() -> int:
    """A local port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
