"""Webhook delivery: the signed JSON body, and a POST only to a public address.

A webhook URL is chosen by a project admin, and the server sends the request, so an unchecked URL would let a tenant
reach what only the server can (a cloud's metadata service at 169.254.169.254, a database on 10.x, the server's own
admin ports). The host is resolved and every address it resolves to must be public; the connection is then made to
the address that was checked (a DNS answer changed between check and connect cannot redirect it), and redirects are
never followed. `TIDAL_WEBHOOK_ALLOW_PRIVATE` lifts the address rule for a private deployment.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import socket
import ssl
from typing import cast
from urllib.parse import SplitResult, urlsplit

from django.conf import settings

from core.addresses import is_public

SIGNATURE_HEADER = "X-Tidal-Signature"
EVENT_HEADER = "X-Tidal-Event"
TIMEOUT_SECONDS = 5.0
SCHEMES = ("http", "https")


class Refused(Exception):
    """The target is not allowed (private address, bad URL): not retried."""


class DeliveryFailed(Exception):
    """The target could not be reached or answered 5xx, 408 or 429: worth retrying."""


def signature(secret: str, body: bytes) -> str:
    """The header value: "sha256=" and the hex HMAC-SHA256 of the raw body under the webhook's secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def check_url(url: str) -> SplitResult:
    """The URL's parts if its form is acceptable (http or https, a host, no credentials); Refused otherwise. An
    address literal is checked here too; a host name only when sending, as its addresses can change."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise Refused("must be an http or https URL")
    if not parts.hostname:
        raise Refused("must name a host")
    if parts.username or parts.password:
        raise Refused("must not carry credentials; the signature authenticates the request")
    try:
        port = parts.port
    except ValueError:  # not a number, or above 65535
        port = 0
    if port == 0:
        raise Refused("must name a port from 1 to 65535, or none")
    try:
        literal = ipaddress.ip_address(parts.hostname)
    except ValueError:
        literal = None
    if literal is not None:
        _require_public(literal)
    elif parts.hostname == "localhost" or parts.hostname.endswith(".localhost"):
        _require_public(ipaddress.ip_address("127.0.0.1"))
    return parts


def _require_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    if not settings.TIDAL_WEBHOOK_ALLOW_PRIVATE and not is_public(address):
        raise Refused(f"resolves to {address}, a private, loopback, link-local, multicast or reserved address "
                      "(or one embedding such an address: IPv4-mapped, 6to4, Teredo, NAT64)")


def resolve(parts: SplitResult) -> str:
    """The address to connect to: every address the host resolves to must be public (one bad answer refuses)."""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise DeliveryFailed(f"cannot resolve {parts.hostname}: {e}") from None
    addresses = [str(info[4][0]) for info in infos]  # an AF_INET(6) sockaddr's host: a str
    for address in addresses:
        _require_public(ipaddress.ip_address(address.split("%", 1)[0]))
    return addresses[0]


def deliver(url: str, secret: str, body: bytes, event: str) -> int:
    """POST `body` to `url`, signed; returns the status. Refused or DeliveryFailed when it should not or could not
    be delivered."""
    parts = check_url(url)
    address = resolve(parts)
    headers = {"Content-Type": "application/json", "User-Agent": "Tidal-Webhook/1", EVENT_HEADER: event,
               SIGNATURE_HEADER: signature(secret, body)}
    try:
        status = _send(parts, address, body, headers)
    except (OSError, http.client.HTTPException) as e:
        raise DeliveryFailed(f"{parts.hostname}: {e}") from None
    if status >= 500 or status in (408, 429):
        raise DeliveryFailed(f"{parts.hostname} answered {status}")
    if status >= 300:  # a redirect is not followed: it could point anywhere, a private address included
        raise Refused(f"{parts.hostname} answered {status}")
    return status


def _send(parts: SplitResult, address: str, body: bytes, headers: dict[str, str]) -> int:
    """One POST over a connection to the checked `address`; the Host header and TLS name stay the URL's host."""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = cast(str, parts.hostname)  # `check_url` refused a URL without one
    if parts.scheme == "https":
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=TIMEOUT_SECONDS, context=ssl.create_default_context())
    else:
        connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT_SECONDS)
    # Pin the checked address. typeshed does not declare http.client's connection factory.
    connection._create_connection = (  # type: ignore[attr-defined]
        lambda _, *args: socket.create_connection((address, port), *args))
    try:
        path = parts.path or "/"
        connection.request("POST", f"{path}?{parts.query}" if parts.query else path, body=body, headers=headers)
        response = connection.getresponse()
        response.read(65536)
        return response.status
    finally:
        connection.close()
