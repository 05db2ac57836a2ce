"""Webhook targets that reach a private address through an IPv6 address embedding it (6to4, Teredo, NAT64), or
name no usable port, are refused when the webhook is written and again when it would be sent."""

from __future__ import annotations

from unittest import mock

import pytest

from notifications import webhooks
from tracking.models import Webhook

pytestmark = pytest.mark.django_db

REFUSED = ["http://[2002:7f00:1::]/hook",  # 6to4 of 127.0.0.1
           "http://[2002:a00:1::1]/hook",  # 6to4 of 10.0.0.1
           "http://[2002:a9fe:a9fe::]/latest/meta-data/",  # 6to4 of 169.254.169.254
           "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",  # Teredo to 127.0.0.1
           "http://[64:ff9b::7f00:1]/hook",  # NAT64 of 127.0.0.1
           "http://[64:ff9b::a9fe:a9fe]/hook",  # NAT64 of 169.254.169.254
           "http://[64:ff9b:1::a00:1]/hook",  # NAT64 local use: reaches whatever the operator maps
           "http://hooks.example.com:0/hook", "http://hooks.example.com:65536/hook",
           "http://hooks.example.com:99999/hook", "http://hooks.example.com:http/hook"]


@pytest.mark.parametrize("url", REFUSED)
def test_an_embedded_private_address_or_a_bad_port_is_a_400_naming_url(tenant, clients, url):
    response = clients["admin"].post("/api/v1/webhooks/", {"project": "vision", "url": url, "secret": "s" * 32},
                                    format="json")
    assert response.status_code == 400 and "url" in response.json()["error"]["fields"], response.content
    assert not Webhook.objects.exists()


@pytest.mark.parametrize("url", REFUSED)
def test_they_are_never_sent_to(url):
    with mock.patch("notifications.webhooks._send") as send, pytest.raises(webhooks.Refused):
        webhooks.deliver(url, "s" * 32, b"{}", "alert.opened")
    send.assert_not_called()


@pytest.mark.parametrize("url", ["http://[2002:5db8:d70e::1]/hook",  # 6to4 of 93.184.215.14
                                 "http://[64:ff9b::5db8:d70e]/hook", "https://hooks.example.com:8443/hook",
                                 "http://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:65535/"])
def test_public_targets_and_ports_in_range_are_accepted(tenant, clients, url):
    response = clients["admin"].post("/api/v1/webhooks/", {"project": "vision", "url": url, "secret": "s" * 32},
                                    format="json")
    assert response.status_code == 201, response.content
