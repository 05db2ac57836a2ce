"""The client's address: X-Forwarded-For counts only when a trusted proxy sent it, read from the right; the
anonymous rate limit counts that address, so a client cannot make up a new one per request."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory
from rest_framework.settings import api_settings

from core.addresses import address_in, client_address, is_direct
from tenancy.throttling import PerUserRateThrottle

PROXIES = ["10.0.0.0/8", "127.0.0.1"]


def request(remote: str = "203.0.113.7", forwarded: str | None = None):
    extra = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    made = RequestFactory().get("/api/v1/me/", **extra)
    made.user = AnonymousUser()
    return made


def test_without_trusted_proxies_the_header_is_ignored(settings):
    settings.TIDAL_TRUSTED_PROXIES = []
    assert client_address(request("203.0.113.7", "198.51.100.1")) == "203.0.113.7"


@pytest.mark.parametrize(("remote", "forwarded", "client"), [
    ("10.1.2.3", "198.51.100.1", "198.51.100.1"),  # one trusted proxy
    ("10.1.2.3", "6.6.6.6, 198.51.100.1", "198.51.100.1"),  # the client made up the left-most entry
    ("10.1.2.3", "198.51.100.1, 10.9.9.9, 127.0.0.1", "198.51.100.1"),  # a chain of trusted proxies
    ("10.1.2.3", "garbage, 198.51.100.1", "198.51.100.1"),
    ("10.1.2.3", "198.51.100.1, garbage", "10.1.2.3"),  # nothing a trusted proxy wrote names the client
    ("10.1.2.3", "", "10.1.2.3"),
    ("10.1.2.3", "10.4.4.4", "10.4.4.4"),  # only proxies: the farthest one
    ("203.0.113.7", "198.51.100.1", "203.0.113.7"),  # not from a trusted proxy: the header is the client's word
    ("10.1.2.3", "::ffff:198.51.100.1", "198.51.100.1"),
])
def test_the_right_most_untrusted_address_behind_a_trusted_proxy(settings, remote, forwarded, client):
    settings.TIDAL_TRUSTED_PROXIES = PROXIES
    assert client_address(request(remote, forwarded)) == client


def test_addresses_and_networks():
    assert address_in("10.200.1.1", PROXIES) and address_in("::ffff:127.0.0.1", PROXIES)
    assert not address_in("11.0.0.1", PROXIES) and not address_in("not-an-address", PROXIES)


def test_a_request_is_direct_only_without_proxy_headers_and_not_from_a_proxy(settings):
    settings.TIDAL_TRUSTED_PROXIES = PROXIES
    assert is_direct(request("203.0.113.7"))
    assert not is_direct(request("203.0.113.7", "198.51.100.1"))
    assert not is_direct(request("127.0.0.1"))


def test_a_made_up_forwarded_address_does_not_reset_the_anonymous_limit(db, settings):
    settings.TIDAL_TRUSTED_PROXIES = []
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {**api_settings.DEFAULT_THROTTLE_RATES, "anon": "3/min"}}
    throttle = PerUserRateThrottle()
    allowed = [throttle.allow_request(request("203.0.113.7", f"198.51.100.{n}"), None) for n in range(5)]
    assert allowed == [True, True, True, False, False]
    assert throttle.allow_request(request("203.0.113.8"), None)  # another client


def test_behind_a_trusted_proxy_each_client_has_its_own_anonymous_limit(db, settings):
    settings.TIDAL_TRUSTED_PROXIES = PROXIES
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {**api_settings.DEFAULT_THROTTLE_RATES, "anon": "1/min"}}
    throttle = PerUserRateThrottle()
    assert throttle.allow_request(request("10.1.2.3", "198.51.100.1"), None)
    assert not throttle.allow_request(request("10.1.2.3", "6.6.6.6, 198.51.100.1"), None)
    assert throttle.allow_request(request("10.1.2.3", "198.51.100.2"), None)


@pytest.mark.parametrize(("address", "public"), [
    ("93.184.215.14", True), ("10.0.0.1", False), ("127.0.0.1", False), ("169.254.169.254", False),
    ("100.64.0.1", False), ("::1", False), ("fe80::1", False), ("fc00::1", False),
    ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", True), ("::ffff:10.0.0.1", False), ("::ffff:93.184.215.14", True),
    ("2002:7f00:1::", False), ("2002:c0a8:101::1", False), ("2002:5db8:d70e::1", True),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", False), ("64:ff9b::7f00:1", False), ("64:ff9b::5db8:d70e", True),
    ("64:ff9b:1::5db8:d70e", False)])
def test_an_address_is_public_only_with_every_ipv4_address_it_embeds(address, public):
    from ipaddress import ip_address

    from core.addresses import is_public

    assert is_public(ip_address(address)) is public
