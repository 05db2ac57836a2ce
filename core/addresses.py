"""The client's address, the one answer the rate limits, login protection and /metrics all use.

REMOTE_ADDR is the address of whoever opened the connection. Behind a reverse proxy that is the proxy, and the
client is in `X-Forwarded-For`, which each proxy extends on the right with the address it received the request
from. Everything left of what a trusted proxy appended was written by the client and proves nothing, so the header
is read only when REMOTE_ADDR is a trusted proxy (TIDAL_TRUSTED_PROXIES), and only from the right: the right-most
address that is not itself a trusted proxy is the client.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

from django.conf import settings
from django.http import HttpRequest

# Headers a proxy adds: a request carrying one did not come straight from its client.
FORWARDING_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


@lru_cache(maxsize=16)
def _networks(entries: tuple[str, ...]) -> tuple[IPv4Network | IPv6Network, ...]:
    return tuple(ip_network(entry, strict=False) for entry in entries)


def _parse(text: str) -> IPv4Address | IPv6Address | None:
    try:
        address = ip_address(text.strip())
    except ValueError:
        return None
    # An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d; it is the same client as a.b.c.d.
    if isinstance(address, IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


# NAT64 prefixes: a gateway turns 64:ff9b::a.b.c.d into a connection to a.b.c.d. The local-use prefix lets an
# operator place the IPv4 address in several ways, so what it reaches cannot be told from the address.
NAT64_WELL_KNOWN = IPv6Network("64:ff9b::/96")
NAT64_LOCAL_USE = IPv6Network("64:ff9b:1::/48")


def translated_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address `address` stands for, if it is one in IPv6 form: IPv4-mapped (::ffff:a.b.c.d, a dual-stack
    socket connects to a.b.c.d) or NAT64's well-known prefix (64:ff9b::a.b.c.d, a gateway connects to it)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return IPv4Address(int(address) & 0xFFFFFFFF) if address in NAT64_WELL_KNOWN else None


def tunnelled_ipv4(address: IPv6Address) -> list[IPv4Address]:
    """The IPv4 addresses a relay delivers packets for `address` to: 6to4 (2002:aabb:ccdd::/48 to a.b.c.d) and
    Teredo (its server and the client it tunnels to)."""
    found = [address.sixtofour] if address.sixtofour is not None else []
    return found + list(address.teredo or ())


def is_public(address: IPv4Address | IPv6Address) -> bool:
    """Whether `address` is a public unicast address (not private, loopback, link-local, multicast, reserved or
    unspecified), and so is every IPv4 address it stands for or is tunnelled to: what a server-side request (a
    webhook) may reach. NAT64's local-use prefix never is: where it leads is the operator's choice."""
    if isinstance(address, IPv6Address):
        translated = translated_ipv4(address)
        if translated is not None:
            return is_public(translated)
        if address in NAT64_LOCAL_USE or not all(is_public(ipv4) for ipv4 in tunnelled_ipv4(address)):
            return False
    return address.is_global and not (address.is_private or address.is_loopback or address.is_link_local
                                      or address.is_multicast or address.is_reserved or address.is_unspecified)


def address_in(address: str, networks: Iterable[str]) -> bool:
    """Whether `address` lies in one of `networks` (addresses or CIDRs, e.g. "10.0.0.0/8", "::1")."""
    parsed = _parse(address)
    return parsed is not None and any(parsed in network for network in _networks(tuple(networks)))


def client_address(request: HttpRequest) -> str:
    """The address of the client behind the configured proxies (REMOTE_ADDR when it is not one of them)."""
    remote = request.META.get("REMOTE_ADDR", "")
    trusted = settings.TIDAL_TRUSTED_PROXIES
    if not trusted or not address_in(remote, trusted):
        return remote
    client = remote
    for hop in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        parsed = _parse(hop)
        if parsed is None:  # not an address: the client wrote it; the last hop read is the best known
            break
        client = str(parsed)
        if not address_in(client, trusted):
            break
    return client


def is_direct(request: HttpRequest) -> bool:
    """Whether the request came straight from its client: no proxy, trusted or not, forwarded it."""
    trusted = settings.TIDAL_TRUSTED_PROXIES
    forwarded = any(request.META.get(header) for header in FORWARDING_HEADERS)
    return not forwarded and not (trusted and address_in(request.META.get("REMOTE_ADDR", ""), trusted))
