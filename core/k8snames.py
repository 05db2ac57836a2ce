"""Kubernetes' own rules for the names a job carries into a cluster: label keys and values, environment variable
names, image references (k8s.io/apimachinery/pkg/util/validation and distribution/reference).

Submission checks a job with them, so what Kubernetes or the kubelet would refuse is a 400 naming the field instead
of a failed dispatch later; the Kubernetes renderer checks with the same functions. Pure: no Django.

Every pattern is matched whole with `fullmatch`: `$` also matches before a final newline, which let "NAME\\n" pass.
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_NAME_MAX = 63
LABEL_VALUE_MAX = 63
IMAGE_NAME_MAX = 255  # distribution/reference's NameTotalLengthMax: the repository name, registry included

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")

# The grammar of distribution/reference (what `docker pull` and the kubelet parse), spelled with ASCII classes
# where Go's RE2 reads \w as ASCII.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_IMAGE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)


def is_dns1123_label(name: str) -> bool:
    """A namespace, a pod name's part, a container port name: lowercase letters, digits and dashes."""
    return len(name) <= DNS1123_LABEL_MAX and _DNS1123_LABEL.fullmatch(name) is not None


def is_dns1123_subdomain(name: str) -> bool:
    return len(name) <= DNS1123_SUBDOMAIN_MAX and _DNS1123_SUBDOMAIN.fullmatch(name) is not None


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a label key (`[prefix/]name`, the prefix a DNS-1123 subdomain), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "its prefix before '/' is empty"
    if slash and "/" in prefix:
        return "it has more than one '/'"
    if slash and not is_dns1123_subdomain(prefix):
        return (f"its prefix must be a DNS subdomain of at most {DNS1123_SUBDOMAIN_MAX} characters "
                "(lowercase letters, digits, '-' and '.')")
    if not name or len(name) > LABEL_NAME_MAX or _QUALIFIED_NAME.fullmatch(name) is None:
        return (f"its name must be 1-{LABEL_NAME_MAX} letters, digits, '-', '_' or '.', starting and ending with a "
                "letter or digit")
    return None


# Label prefixes a job's own labels may not use: Kubernetes keeps kubernetes.io and k8s.io (and their subdomains)
# for its components, and Tidal selects and identifies its pods by tidal.dev labels, so a job carrying one could pass
# for another's pods. app.kubernetes.io is the exception Kubernetes makes: its recommended labels of an application.
RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io", "tidal.dev")
USER_LABEL_DOMAINS = ("app.kubernetes.io",)


def reserved_label_domain(key: str) -> str | None:
    """The reserved domain `key`'s prefix falls in (see RESERVED_LABEL_DOMAINS), or None."""
    prefix = key.rpartition("/")[0].lower()
    if not prefix or prefix in USER_LABEL_DOMAINS:
        return None
    return next((domain for domain in RESERVED_LABEL_DOMAINS
                 if prefix == domain or prefix.endswith("." + domain)), None)


def is_label_value(value: str) -> bool:
    """Empty, or at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit."""
    return value == "" or (len(value) <= LABEL_VALUE_MAX and _QUALIFIED_NAME.fullmatch(value) is not None)


def is_env_name(name: str) -> bool:
    """An environment variable name the API server accepts: letters, digits, '-', '.' and '_', not starting with a
    digit, and neither '.' nor starting with '..'."""
    return _ENV_NAME.fullmatch(name) is not None and name != "." and not name.startswith("..")


def is_image_reference(reference: str) -> bool:
    """`[registry[:port]/]path[:tag][@digest]`: the path lowercase, no spaces, the name at most 255 characters."""
    match = _IMAGE.fullmatch(reference)
    return match is not None and len(match["name"]) <= IMAGE_NAME_MAX
