"""Encryption at rest for cluster credentials (kubeconfigs): Fernet from `cryptography`.

The key comes from ``TIDAL_ENCRYPTION_KEY`` (``settings.TIDAL["ENCRYPTION_KEY"]``): one or more Fernet keys
separated by commas; the first encrypts, every one decrypts, so a key can be rotated by prepending the new one
(and re-saving the clusters). It is required when DEBUG is off (the settings refuse to start without it); in
development it may be unset, and a key is derived from ``SECRET_KEY`` (SHA-256), so that changing SECRET_KEY makes
the kubeconfigs stored so far unreadable.
Generate a key with ``python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"``.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from core.errors import DomainError


def _keys() -> list[bytes]:
    configured = str(settings.TIDAL.get("ENCRYPTION_KEY") or "")
    keys = [k.strip().encode() for k in configured.split(",") if k.strip()]
    if not keys:
        digest = hashlib.sha256(b"tidal-credentials:" + settings.SECRET_KEY.encode()).digest()
        keys = [base64.urlsafe_b64encode(digest)]
    return keys


def _fernet() -> MultiFernet:
    try:
        return MultiFernet([Fernet(key) for key in _keys()])
    except ValueError as exc:
        raise ImproperlyConfigured(f"TIDAL_ENCRYPTION_KEY holds an invalid Fernet key: {exc}") from None


def encrypt(text: str) -> str:
    return _fernet().encrypt(text.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except InvalidToken:
        raise DomainError("The stored kubeconfig cannot be decrypted with the configured key (was "
                          "TIDAL_ENCRYPTION_KEY or SECRET_KEY changed?); paste it again.",
                          field="kubeconfig", code="undecryptable") from None
