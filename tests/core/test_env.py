"""The environment readers: an empty variable is an unset one, secrets also come from files, and `.env` (as
`cp .env.example .env` makes it) neither crashes start-up nor overrides the environment in `make`."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from django.core.exceptions import ImproperlyConfigured

from core import env
from tests.envs import ROOT, dotenv_example, load_settings


@pytest.mark.parametrize(("reader", "default"), [
    (lambda: env.env_str("X", "fallback"), "fallback"),
    (lambda: env.env_secret("X", "fallback"), "fallback"),
    (lambda: env.env_bool("X", True), True),
    (lambda: env.env_int("X", 7), 7),
    (lambda: env.env_float("X", 1.5), 1.5),
    (lambda: env.env_list("X", ["a"]), ["a"]),
    (lambda: env.env_choice("X", "b", ("a", "b")), "b"),
    (lambda: env.env_rate("X", "5/min"), "5/min"),
])
@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_variable_is_unset_for_every_reader(monkeypatch, reader, default, empty):
    monkeypatch.setenv("X", empty)
    assert reader() == default


def test_a_required_variable_left_empty_is_named(monkeypatch):
    monkeypatch.setenv("X", "")
    with pytest.raises(ImproperlyConfigured, match="X must be set"):
        env.env_str("X")


def test_a_secret_comes_from_its_file(monkeypatch, tmp_path):
    (tmp_path / "key").write_text("s3cret value\n")
    monkeypatch.delenv("X", raising=False)
    monkeypatch.setenv("X_FILE", str(tmp_path / "key"))
    assert env.env_secret("X") == "s3cret value"


def test_a_secret_set_twice_missing_or_empty_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("X", "one")
    monkeypatch.setenv("X_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="not both"):
        env.env_secret("X")
    monkeypatch.delenv("X")
    with pytest.raises(ImproperlyConfigured, match="X_FILE names a file that cannot be read"):
        env.env_secret("X")
    (tmp_path / "empty").write_text("\n")
    monkeypatch.setenv("X_FILE", str(tmp_path / "empty"))
    with pytest.raises(ImproperlyConfigured, match=r"X \(or X_FILE\) must be set"):
        env.env_secret("X")


def test_settings_start_with_the_variables_of_env_example(monkeypatch):
    """`cp .env.example .env`: every variable it leaves empty takes its default (DATABASE_URL= is SQLite)."""
    settings = load_settings(monkeypatch, {**dotenv_example(), "DEBUG": "1"})
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    assert settings.EMBEDDED and settings.ALLOWED_HOSTS == ["localhost", "127.0.0.1"]


def test_every_secret_is_read_from_a_file(monkeypatch, tmp_path):
    files = {"SECRET_KEY": "from-a-file-" + "k" * 40, "DATABASE_URL": "postgres://tidal:pw@db:5432/tidal",
             "REDIS_URL": "redis://:pw@cache:6379/0", "EMAIL_HOST_PASSWORD": "mail-pw"}
    environ = {"DEBUG": "1"}
    for name, value in files.items():
        (tmp_path / name).write_text(value + "\n")
        environ[f"{name}_FILE"] = str(tmp_path / name)
    settings = load_settings(monkeypatch, environ)
    assert (files["SECRET_KEY"], files["REDIS_URL"]) == (settings.SECRET_KEY, settings.REDIS_URL)
    assert settings.DATABASES["default"]["PASSWORD"] == "pw" and settings.EMAIL_HOST_PASSWORD == "mail-pw"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_make_reads_dotenv_only_for_what_the_environment_leaves_unset(tmp_path):
    """`PORT=8010 make run` serves on 8010 even when `.env` sets PORT."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / ".env").write_text("# a comment\nPORT=9000\nHOST=0.0.0.0\nDEBUG=\nEMPTY_HERE=\n")

    def probe(**extra: str) -> str:
        environ = {k: v for k, v in os.environ.items() if k not in ("PORT", "HOST", "DEBUG", "MAKEFLAGS")}
        rule = "probe: ; @$(DEV_ENV) sh -c 'echo $$PORT $$HOST $$DEBUG'"
        done = subprocess.run(["make", "-s", "--eval", rule, "probe"], cwd=tmp_path, env={**environ, **extra},
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert probe() == "9000 0.0.0.0 1"
    assert probe(PORT="8010") == "8010 0.0.0.0 1"
    assert probe(PORT="8010", DEBUG="0") == "8010 0.0.0.0 0"
