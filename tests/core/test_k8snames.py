"""Kubernetes' naming rules, as the API server and the kubelet apply them; a trailing newline never passes."""

from __future__ import annotations

import pytest

from core.k8snames import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_env_name,
    is_image_reference,
    is_label_value,
    label_key_problem,
)

LABEL_KEYS = [
    ("app", True),
    ("app.kubernetes.io/name", True),
    ("sim.tidal.dev/fail-after", True),
    ("A_b.c-D9", True),
    ("x" * 63, True),
    ("example.com/" + "x" * 63, True),
    ("a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61 + "/name", True),
    ("", False),
    ("app\n", False),
    ("example.com/app\n", False),
    ("x" * 64, False),
    ("-app", False),
    ("app-", False),
    ("/app", False),
    ("example.com/", False),
    ("Example.com/app", False),
    ("a/b/c", False),
    ("has space", False),
    ("a" * 254 + "/name", False),
]


@pytest.mark.parametrize(("key", "valid"), LABEL_KEYS)
def test_label_keys(key: str, valid: bool) -> None:
    assert (label_key_problem(key) is None) is valid


@pytest.mark.parametrize(("value", "valid"), [
    ("", True), ("v1", True), ("user_error", True), ("1.5", True), ("a-B_c.D", True), ("x" * 63, True),
    ("x" * 64, False), ("v1\n", False), ("-v1", False), ("v1.", False), ("a b", False), ("a/b", False),
])
def test_label_values(value: str, valid: bool) -> None:
    assert is_label_value(value) is valid


@pytest.mark.parametrize(("name", "valid"), [
    ("PATH", True), ("_x", True), ("my.env-name", True), ("MY_ENV.NAME", True), ("MyEnvName1", True), (".a", True),
    ("", False), ("1BAD", False), ("LR\n", False), ("A B", False), ("A=B", False), (".", False), ("..", False),
    ("..a", False), ("ÄRGER", False),
])
def test_env_names(name: str, valid: bool) -> None:
    assert is_env_name(name) is valid


@pytest.mark.parametrize(("reference", "valid"), [
    ("ubuntu", True),
    ("ubuntu:22.04", True),
    ("ghcr.io/acme/train:1", True),
    ("nvcr.io/nvidia/pytorch:24.01-py3", True),
    ("localhost:5000/team/model:latest", True),
    ("registry.example.com:443/a/b-c__d.e@sha256:" + "a" * 64, True),
    ("ubuntu@sha256:" + "0" * 64, True),
    ("[::1]:5000/x", True),
    ("Registry.Example.com/library/ubuntu", True),  # the registry's host name may have capitals, the path not
    ("a/b:TAG_1." + "x" * 120, True),
    ("", False),
    ("Ubuntu", False),
    ("ghcr.io/Acme/train:1", False),
    ("has space:1", False),
    ("ubuntu\n", False),
    ("ubuntu:1\n", False),
    ("ubuntu:", False),
    ("ubuntu:-x", False),
    ("ubuntu:" + "x" * 129, False),
    ("ubuntu@sha256:abc", False),
    ("a//b", False),
    ("/ubuntu", False),
    ("ubuntu/", False),
    ("a..b", False),
    ("registry.example.com/" + "a" * 250, False),
])
def test_image_references(reference: str, valid: bool) -> None:
    assert is_image_reference(reference) is valid


@pytest.mark.parametrize("reference", ["a" * 480 + "!", "a-" * 240 + "!", ("a" * 20 + ".") * 20 + "/x!", "a/" * 240])
def test_image_references_are_checked_in_linear_time(reference: str) -> None:
    """Python's regular expressions backtrack where Go's do not: a hostile reference must still answer at once."""
    import time

    started = time.perf_counter()
    assert not is_image_reference(reference)
    assert time.perf_counter() - started < 0.05


def test_dns_names() -> None:
    assert is_dns1123_label("tidal-vision") and not is_dns1123_label("tidal-vision\n")
    assert not is_dns1123_label("x" * 64) and not is_dns1123_label("Vision")
    assert is_dns1123_subdomain("tidal.dev") and not is_dns1123_subdomain("tidal.dev\n")
