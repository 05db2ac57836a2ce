"""A production start (DEBUG off) refuses what would make it unsafe (a placeholder or short SECRET_KEY, no key of
its own for kubeconfigs) and is HTTPS-only with a Content-Security-Policy: `check --deploy` finds nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from tests.envs import PRODUCTION_FERNET_KEY, PRODUCTION_SECRET, ROOT, dotenv_example, load_settings

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


def test_check_deploy_has_no_warnings_with_a_production_environment():
    """`manage.py check --deploy` as production runs it: only the variables a deployment must set."""
    env = {"PATH": os.environ["PATH"], "DJANGO_SETTINGS_MODULE": "mlplatform.settings", **PRODUCTION}
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "System check identified no issues" in done.stdout, done.stdout


def test_https_settings_follow_debug_and_can_be_turned_off_for_a_tls_terminating_proxy(monkeypatch):
    production = load_settings(monkeypatch, PRODUCTION)
    assert production.SECURE_SSL_REDIRECT and production.SECURE_HSTS_SECONDS == 365 * 86400
    assert production.SESSION_COOKIE_SECURE and production.CSRF_COOKIE_SECURE
    assert production.SECURE_PROXY_SSL_HEADER is None
    proxied = load_settings(monkeypatch, {**PRODUCTION, "TIDAL_SSL_REDIRECT": "0",
                                          "TIDAL_PROXY_SSL_HEADER": "X-Forwarded-Proto"})
    assert not proxied.SECURE_SSL_REDIRECT and proxied.SECURE_PROXY_SSL_HEADER == ("HTTP_X_FORWARDED_PROTO", "https")
    development = load_settings(monkeypatch, {"DEBUG": "1"})  # make run, on http://127.0.0.1:8000
    assert not development.SECURE_SSL_REDIRECT and development.SECURE_HSTS_SECONDS == 0
    assert not development.SESSION_COOKIE_SECURE and not development.CSRF_COOKIE_SECURE


def test_plain_http_is_redirected_except_probes_and_https_gets_hsts(db, client, settings):
    settings.SECURE_SSL_REDIRECT, settings.SECURE_HSTS_SECONDS = True, 3600
    response = Client().get("/accounts/login/")
    assert response.status_code == 301 and response["Location"] == "https://testserver/accounts/login/"
    assert Client().get("/healthz").status_code == 200
    secure = Client().get("/accounts/login/", secure=True)
    assert secure.status_code == 200 and secure["Strict-Transport-Security"] == "max-age=3600; includeSubDomains"


def test_pages_and_the_api_carry_the_content_security_policy(db, client):
    for path in ("/accounts/login/", "/api/v1/me/", "/api/docs/"):
        policy = client.get(path)["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy and "unsafe-inline" not in policy


INLINE = re.compile(r"<script>|<script\s+(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=", re.IGNORECASE)


def test_templates_hold_no_inline_script_style_or_event_handler():
    """What the policy would refuse: scripts and styles come from /static."""
    found = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if INLINE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
