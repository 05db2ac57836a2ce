"""A production start (DEBUG off) refuses what would make it unsafe: a placeholder or short SECRET_KEY, no key of
its own for kubeconfigs."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.envs import PRODUCTION_FERNET_KEY, PRODUCTION_SECRET, dotenv_example, load_settings

PRODUCTION = {"SECRET_KEY": PRODUCTION_SECRET, "TIDAL_ENCRYPTION_KEY": PRODUCTION_FERNET_KEY,
              "ALLOWED_HOSTS": "tidal.example.com"}


def test_a_production_environment_starts(monkeypatch):
    settings = load_settings(monkeypatch, PRODUCTION)
    assert not settings.DEBUG and settings.TIDAL["ENCRYPTION_KEY"] == PRODUCTION_FERNET_KEY


@pytest.mark.parametrize("secret", [
    "change-me-to-a-long-random-string",  # .env.example's placeholder until issue 14
    "dev-only-insecure-secret-key-change-me-0123456789abcdef",
    "django-insecure-0123456789abcdefghijklmnopqrstuvwxyz0123456789",
    "short-but-random-Xk2",
    "a" * 60,
])
def test_a_placeholder_or_weak_secret_key_is_refused_in_production(monkeypatch, secret):
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY is") as refused:
        load_settings(monkeypatch, {**PRODUCTION, "SECRET_KEY": secret})
    assert secret not in str(refused.value)


def test_env_example_as_it_is_does_not_start_in_production(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match=r"SECRET_KEY \(or SECRET_KEY_FILE\) must be set"):
        load_settings(monkeypatch, dotenv_example())


def test_production_needs_its_own_kubeconfig_key(monkeypatch, tmp_path):
    with pytest.raises(ImproperlyConfigured, match="TIDAL_ENCRYPTION_KEY .* must be set when DEBUG is off"):
        load_settings(monkeypatch, {**PRODUCTION, "TIDAL_ENCRYPTION_KEY": ""})
    (tmp_path / "fernet").write_text(PRODUCTION_FERNET_KEY + "\n")
    settings = load_settings(monkeypatch, {**PRODUCTION, "TIDAL_ENCRYPTION_KEY": "",
                                           "TIDAL_ENCRYPTION_KEY_FILE": str(tmp_path / "fernet")})
    assert settings.TIDAL["ENCRYPTION_KEY"] == PRODUCTION_FERNET_KEY


def test_development_derives_the_kubeconfig_key_and_needs_no_secret_key(monkeypatch, settings):
    from clusters import crypto

    loaded = load_settings(monkeypatch, {"DEBUG": "1"})
    assert loaded.TIDAL["ENCRYPTION_KEY"] == ""
    settings.SECRET_KEY, settings.TIDAL = loaded.SECRET_KEY, loaded.TIDAL
    assert crypto.decrypt(crypto.encrypt("apiVersion: v1")) == "apiVersion: v1"
