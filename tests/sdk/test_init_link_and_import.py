"""`tidal.init()` prints one link to its run (as W&B does), which `quiet=True` or TIDAL_QUIET=1 suppresses; and a
directory named `tidal` beside a script (a clone of this repository) cannot shadow the SDK."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tidal

from tenancy.services import token_create
from tests.sdk.test_sdk import FAST

SDK = Path(__file__).resolve().parents[2] / "sdk"


@pytest.fixture(autouse=True)
def sdk_env(monkeypatch, tmp_path):
    for name in ("TIDAL_URL", "TIDAL_TOKEN", "TIDAL_PROJECT", "TIDAL_RUN_ID", "TIDAL_RUN_TOKEN", "TIDAL_ATTEMPT",
                 "RANK", "LOCAL_RANK", "TIDAL_QUIET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TIDAL_CONFIG", str(tmp_path / "no-config.json"))
    monkeypatch.setenv("TIDAL_SPOOL_DIR", str(tmp_path / "spool"))
    yield
    tidal._finish_all(None, 2.0)
    tidal._current = None


@pytest.mark.django_db(transaction=True)
def test_init_prints_the_runs_link_once_unless_asked_not_to(live_server, tenant, capsys, monkeypatch):
    token = token_create(user=tenant.users["member"], name="sdk")[1]
    run = tidal.init(project="vision", name="lr-3e-4", url=live_server.url, token=token, **FAST)
    tidal.log({"loss": 1.0})
    tidal.finish()
    err = capsys.readouterr().err
    assert err.count(f"{live_server.url}/runs/{run.id}/") == 1
    assert f'tidal: run {run.id} "lr-3e-4": {live_server.url}/runs/{run.id}/' in err.splitlines()
    tidal.init(run_id=run.id, url=live_server.url, token=token, quiet=True, **FAST)
    tidal.finish(status=None)
    monkeypatch.setenv("TIDAL_QUIET", "1")
    tidal.init(run_id=run.id, url=live_server.url, token=token, **FAST)
    tidal.finish(status=None)
    assert "/runs/" not in capsys.readouterr().err


def test_a_clone_named_tidal_beside_the_script_does_not_shadow_the_sdk(tmp_path):
    """A directory without __init__.py is a namespace package, which any regular package later on sys.path beats;
    the SDK on sys.path (a plain install, or an editable one made of a path entry) wins."""
    (tmp_path / "tidal" / "sdk").mkdir(parents=True)  # a clone of the repository: no tidal/__init__.py
    (tmp_path / "tidal" / "README.md").write_text("Tidal\n")
    script = tmp_path / "train.py"
    script.write_text("import tidal\nprint(tidal.__file__, hasattr(tidal, 'init'))\n")
    env = {**os.environ, "PYTHONPATH": str(SDK)}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    path, has_init = done.stdout.split()
    assert Path(path) == SDK / "tidal" / "__init__.py" and has_init == "True"


def test_an_editable_install_is_a_path_entry_that_a_tidal_directory_cannot_shadow():
    """setuptools installs a flat-layout project editable through an import hook appended after the path finder,
    so a `tidal` directory in the working directory (a namespace package to the path finder) won over the SDK; a
    package directory of "" makes it a plain path entry (a .pth line), which the test above shows is safe."""
    probe = textwrap.dedent("""
        from setuptools.command.editable_wheel import editable_wheel
        from setuptools.dist import Distribution
        dist = Distribution()
        dist.parse_config_files()
        command = editable_wheel(dist)
        command.ensure_finalized()
        print(type(command._select_strategy("tidal_cli", "0.1.0", "build/lib")).__name__)
    """)
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", probe], cwd=SDK, capture_output=True, text=True,
                          timeout=60, check=False)
    if done.returncode != 0 and ("ImportError" in done.stderr or "AttributeError" in done.stderr):
        pytest.skip(f"this setuptools chooses its editable strategy differently: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "_StaticPth"
