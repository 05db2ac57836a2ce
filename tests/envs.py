"""Settings loaded afresh from a given environment, and the variables `.env.example` sets, for tests of start-up."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Long, random-looking, not a known placeholder: what a production SECRET_KEY looks like.
PRODUCTION_SECRET = "FfZSKAk-2zaAJzeM-1Ajdb_loK16_KkXe0mstA2qkrOOcRitGoEsnTl_sPxXw97T"
PRODUCTION_FERNET_KEY = "62khZpCYtV_XbnQBtAdWwzLLgaeLTHpczgU72PfpQBM="


def dotenv_example() -> dict[str, str]:
    """The variables of `.env.example`, as `cp .env.example .env` gives them to `make` and docker compose."""
    values = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            values[name.strip()] = value
    return values


def load_settings(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> ModuleType:
    """Run mlplatform/settings.py as a new module with exactly `env` as the process environment."""
    monkeypatch.setattr(os, "environ", dict(env))
    spec = importlib.util.spec_from_file_location("settings_under_test", ROOT / "mlplatform" / "settings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
