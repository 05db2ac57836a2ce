"""Brute-force protection: wrong passwords lock an account out (login page and admin console alike) for the clients
it never signed in with, or for the one browser they came from; failed bearer tokens from an address are answered
429 + Retry-After past the limit; each lockout is audited. Someone else's failures never refuse a valid token, nor
a browser the account signed in with before; password reset requests are limited per account and address."""

from __future__ import annotations

import time

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tenancy.models import AuditEntry
from tests.conftest import client_for, make_user

LOCKOUT = {"LOGIN_FAILURES": 5, "TOKEN_FAILURES": 5, "RESETS_PER_ACCOUNT": 3, "RESETS_PER_ADDRESS": 20, "WINDOW": 900,
           "COOL_OFF": 900}


@pytest.fixture(autouse=True)
def lockout(settings):
    settings.TIDAL_LOCKOUT = dict(LOCKOUT)
    return settings.TIDAL_LOCKOUT


def sign_in(client: Client, username: str, password: str, address: str = "203.0.113.7", path="/accounts/login/"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


def signed_in(response) -> bool:
    return response.status_code == 302


def sign_out(client: Client) -> None:
    """End the session and keep the browser's other cookies (Client.logout() forgets them all)."""
    from django.conf import settings

    del client.cookies[settings.SESSION_COOKIE_NAME]


def test_fifty_wrong_passwords_lock_the_account_out_and_the_right_one_is_refused(db):
    alice = make_user("alice")
    client = Client()
    answers = [sign_in(client, "alice", f"wrong-{n}") for n in range(50)]
    assert [a.status_code for a in answers] == [200] * 4 + [429] * 46
    assert "Too many failed sign-ins" not in answers[3].content.decode()
    assert "Too many failed sign-ins for this account. Try again in 15 minutes" in answers[4].content.decode()
    refused = sign_in(client, "alice", "pw-alice-123")
    assert not signed_in(refused) and "Too many failed sign-ins" in refused.content.decode()
    entry = AuditEntry.objects.get(action="login.lockout")
    assert entry.target_id == str(alice.pk) and entry.target_repr == "alice"
    assert entry.changes == {"address": "203.0.113.7", "failures": 5, "cool_off_seconds": 900, "device": False}


def test_the_lockout_is_per_account_and_ends_after_the_cool_off(db, lockout):
    make_user("alice")
    make_user("bob")
    lockout["COOL_OFF"] = 1
    client = Client()
    for n in range(5):
        sign_in(client, "alice", f"wrong-{n}")
    assert not signed_in(sign_in(client, "ALICE", "pw-alice-123"))  # no fresh count by changing case
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
    assert refused.status_code == 429 and "Too many failed sign-ins" in refused.content.decode()
    assert AuditEntry.objects.filter(action="login.lockout").count() == 1


def api(secret: str, address: str = "203.0.113.7"):
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client.get("/api/v1/me/")


def test_malformed_headers_and_run_tokens_count_as_failed_tokens(tenant):
    codes = [api("a b").status_code for _ in range(2)] + [api("tdr_forged").status_code for _ in range(3)]
    assert codes == [401] * 5
    assert api("tdl_anything").status_code == 429


# ------------------------------------------------------------ someone else's failures never refuse a valid credential

def test_bad_tokens_from_a_shared_address_never_refuse_a_valid_token_from_it(tenant):
    """An office NAT: 20 bad tokens from the address, then colleagues' valid tokens (one never used before, so not
    cached) from the same address are served; the bad ones are still limited (429, audited once)."""
    used = client_for(tenant.users["member"])._credentials["HTTP_AUTHORIZATION"].split()[1]
    assert api(used).status_code == 200
    fresh = client_for(tenant.users["viewer"])._credentials["HTTP_AUTHORIZATION"].split()[1]
    codes = [api(f"tdl_guess{n}").status_code for n in range(20)]
    assert codes == [401] * 5 + [429] * 15
    assert api(fresh).status_code == 200 and api(used).status_code == 200
    limited = api("tdl_guess-again")
    assert limited.status_code == 429 and 0 < int(limited["Retry-After"]) <= 900
    assert limited.json()["error"]["code"] == "throttled"
    assert api("tdl_guess-again", address="198.51.100.9").status_code == 401  # another client counts its own
    entry = AuditEntry.objects.get(action="token.lockout")
    assert entry.target_repr == "bearer tokens from 203.0.113.7" and entry.changes["failures"] == 5


def test_a_locked_out_sign_in_answers_429_with_retry_after(db):
    make_user("alice")
    for n in range(5):
        sign_in(Client(), "alice", f"wrong-{n}")
    refused = sign_in(Client(), "alice", "pw-alice-123")
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 900
    assert "Too many failed sign-ins" in refused.content.decode()


def test_a_colleague_on_the_shared_address_signs_in_on_her_own_browser_whatever_others_tried(db):
    """Wrong passwords for alice from the office address lock out clients alice never signed in with, not the browser
    she signed in with before (it carries a device cookie for her), which only its own failures lock out."""
    make_user("alice")
    browser = Client()
    assert signed_in(sign_in(browser, "alice", "pw-alice-123"))
    sign_out(browser)
    for n in range(10):
        sign_in(Client(), "alice", f"wrong-{n}")
    assert signed_in(sign_in(browser, "alice", "pw-alice-123"))
    sign_out(browser)
    for n in range(5):
        sign_in(browser, "alice", f"wrong-{n}")
    assert sign_in(browser, "alice", "pw-alice-123").status_code == 429


def test_wrong_passwords_are_counted_per_account_whatever_address_they_come_from(db):
    """Brute force spread over many addresses gets no fresh allowance per address: five wrong passwords in all lock
    the account for every client it never signed in with."""
    make_user("alice")
    for n in range(5):
        sign_in(Client(), "alice", f"wrong-{n}", address=f"198.51.100.{n}")
    assert sign_in(Client(), "alice", "pw-alice-123", address="192.0.2.50").status_code == 429
    assert AuditEntry.objects.filter(action="login.lockout").count() == 1


def test_a_device_cookie_of_another_user_or_forged_brings_no_allowance(db):
    make_user("alice")
    make_user("bob")
    bobs_browser = Client()
    assert signed_in(sign_in(bobs_browser, "bob", "pw-bob-123"))
    sign_out(bobs_browser)
    forged = Client()
    forged.cookies["tidal_device"] = "alice:forged"
    for n in range(5):
        sign_in(Client(), "alice", f"wrong-{n}")
    assert sign_in(bobs_browser, "alice", "pw-alice-123").status_code == 429
    assert sign_in(forged, "alice", "pw-alice-123").status_code == 429


# -------------------------------------------------------------------------------------------------- password reset

def ask_reset(email: str, address: str = "203.0.113.7"):
    return Client().post("/accounts/password_reset/", {"email": email}, REMOTE_ADDR=address)


def test_password_reset_requests_are_limited_per_account(db, lockout):
    """A mailbox is not flooded: past the limit for one e-mail address, from whatever client address, the request is
    refused (429) and no mail is sent; nothing says whether the account exists."""
    from django.core import mail

    make_user("alice")
    lockout["RESETS_PER_ACCOUNT"] = 3
    answers = [ask_reset("alice@example.com", address=f"198.51.100.{n}").status_code for n in range(5)]
    assert answers == [302] * 3 + [429] * 2 and len(mail.outbox) == 3
    refused = ask_reset("ALICE@example.com", address="192.0.2.1")
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 900
    assert "Too many password reset requests" in refused.content.decode()
    assert [ask_reset("nobody@example.com").status_code for _ in range(4)] == [302] * 3 + [429]
    assert ask_reset("member@example.com").status_code == 302  # another account's allowance is its own


def test_password_reset_requests_are_limited_per_address(db, lockout):
    lockout["RESETS_PER_ADDRESS"] = 4
    answers = [ask_reset(f"user{n}@example.com").status_code for n in range(6)]
    assert answers == [302] * 4 + [429] * 2
    assert ask_reset("user9@example.com", address="198.51.100.9").status_code == 302
