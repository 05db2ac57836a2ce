"""Brute-force protection: wrong passwords lock a username out for the client that sent them (login page and
admin console alike), failed bearer tokens lock the client address out of the API with 429 + Retry-After; each
lockout is audited."""

from __future__ import annotations

import time

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tenancy.models import AuditEntry
from tests.conftest import client_for, make_user

LOCKOUT = {"LOGIN_FAILURES": 5, "TOKEN_FAILURES": 5, "WINDOW": 900, "COOL_OFF": 900}


@pytest.fixture(autouse=True)
def lockout(settings):
    settings.TIDAL_LOCKOUT = dict(LOCKOUT)
    return settings.TIDAL_LOCKOUT


def sign_in(client: Client, username: str, password: str, address: str = "203.0.113.7", path="/accounts/login/"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


def signed_in(response) -> bool:
    return response.status_code == 302


def test_fifty_wrong_passwords_lock_the_username_out_and_the_right_one_is_refused(db):
    alice = make_user("alice")
    client = Client()
    answers = [sign_in(client, "alice", f"wrong-{n}") for n in range(50)]
    assert [a.status_code for a in answers] == [200] * 50
    assert "Too many failed sign-ins" not in answers[3].content.decode()
    assert "Too many failed sign-ins for this username from your address. Try again in 15 minutes." in \
        answers[4].content.decode()
    refused = sign_in(client, "alice", "pw-alice-123")
    assert not signed_in(refused) and "Too many failed sign-ins" in refused.content.decode()
    entry = AuditEntry.objects.get(action="login.lockout")
    assert entry.target_id == str(alice.pk) and entry.target_repr == "alice"
    assert entry.changes == {"address": "203.0.113.7", "failures": 5, "cool_off_seconds": 900}


def test_the_lockout_is_per_username_and_address_and_ends_after_the_cool_off(db, lockout):
    make_user("alice")
    make_user("bob")
    lockout["COOL_OFF"] = 1
    client = Client()
    for n in range(5):
        sign_in(client, "alice", f"wrong-{n}")
    assert not signed_in(sign_in(client, "ALICE", "pw-alice-123"))  # no fresh count by changing case
    assert signed_in(sign_in(Client(), "alice", "pw-alice-123", address="198.51.100.9"))
    assert signed_in(sign_in(Client(), "bob", "pw-bob-123"))
    time.sleep(1.2)
    assert signed_in(sign_in(client, "alice", "pw-alice-123"))


def test_a_right_password_forgets_the_failures_before_it(db):
    make_user("alice")
    for n in range(4):
        sign_in(Client(), "alice", f"wrong-{n}")
    assert signed_in(sign_in(Client(), "alice", "pw-alice-123"))
    for n in range(4):
        sign_in(Client(), "alice", f"wrong-{n}")
    assert signed_in(sign_in(Client(), "alice", "pw-alice-123"))
    assert not AuditEntry.objects.filter(action="login.lockout").exists()


def test_an_unknown_username_is_counted_and_audited_by_name(db):
    for n in range(5):
        sign_in(Client(), "nobody", f"wrong-{n}")
    entry = AuditEntry.objects.get(action="login.lockout")
    assert entry.target_type == "" and entry.target_repr == "nobody from 203.0.113.7"


def test_the_admin_console_login_locks_out_too(db):
    make_user("root", is_staff=True, is_superuser=True)
    client = Client()
    for n in range(5):
        sign_in(client, "root", f"wrong-{n}", path="/admin/login/")
    refused = sign_in(client, "root", "pw-root-123", path="/admin/login/")
    assert not signed_in(refused) and "Too many failed sign-ins" in refused.content.decode()
    assert AuditEntry.objects.filter(action="login.lockout").count() == 1


def api(secret: str, address: str = "203.0.113.7"):
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client.get("/api/v1/me/")


def test_failed_bearer_tokens_lock_the_address_out_with_429(tenant):
    good = client_for(tenant.users["member"])._credentials["HTTP_AUTHORIZATION"].split()[1]
    codes = [api(f"tdl_guess{n}").status_code for n in range(8)]
    assert codes == [401] * 5 + [429] * 3
    refused = api(good)
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 900
    assert refused.json()["error"]["code"] == "throttled"
    assert api(good, address="198.51.100.9").status_code == 200  # another client
    entry = AuditEntry.objects.get(action="token.lockout")
    assert entry.target_repr == "bearer tokens from 203.0.113.7" and entry.changes["failures"] == 5


def test_malformed_headers_and_run_tokens_count_as_failed_tokens(tenant):
    codes = [api("a b").status_code for _ in range(2)] + [api("tdr_forged").status_code for _ in range(3)]
    assert codes == [401] * 5
    assert api("tdl_anything").status_code == 429
