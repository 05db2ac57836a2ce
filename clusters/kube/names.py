"""Deterministic DNS-1123 names and the ``tidal.dev/`` label and annotation scheme."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from core.digits import is_digits

MAX_NAME = 63

PREFIX = "tidal.dev/"
LABEL_MANAGED = PREFIX + "managed"  # "true" on every object the platform creates
LABEL_INSTANCE = PREFIX + "instance"  # ClusterSettings.instance
LABEL_JOB = PREFIX + "job"  # job id
LABEL_ATTEMPT = PREFIX + "attempt"  # attempt number
LABEL_PROJECT = PREFIX + "project"  # project slug (label-safe)
LABEL_LAUNCHER = PREFIX + "launcher"
LABEL_COMPONENT = PREFIX + "component"  # parent | replica | rendezvous | hostfile | token | service
LABEL_ROLE = PREFIX + "role"  # pods only
LABEL_INDEX = PREFIX + "index"  # pods only: index within the role
LABEL_RANK = PREFIX + "rank"  # pods only: global rank (0 = master / head)
# A service's Deployment, Service and pods (clusters/kube/serving.py): its key, the object name. They carry no job or
# attempt label, so node sync, the reconciler and the orphan sweep never take them for a training attempt's.
LABEL_SERVICE = PREFIX + "service"

ANNOTATION_JOB_NAME = PREFIX + "job-name"  # the full, untruncated job name
ANNOTATION_PROJECT = PREFIX + "project"  # the full project slug
ANNOTATION_NODE = PREFIX + "placed-node"  # node chosen by the Tidal scheduler
ANNOTATION_CHECKPOINT = PREFIX + "checkpoint-path"
# On a node Tidal cordoned for its quarantine: it uncordons only such a node on release.
ANNOTATION_CORDON = PREFIX + "quarantine-cordon"
# On a service's Deployment and Service: a hash of what Tidal last applied, so applying the same spec again writes
# nothing (the API server's defaults make the stored object differ from what was sent).
ANNOTATION_SPEC_HASH = PREFIX + "spec-hash"

MANAGED_SELECTOR = f"{LABEL_MANAGED}=true"


def _hash(text: str, length: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def slug(text: str) -> str:
    """Lowercase ``text`` and keep ``[a-z0-9-]``; other runs become one dash."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return out or "x"


def object_name(prefix: str, middle: str, suffix: str = "", *, limit: int = MAX_NAME) -> str:
    """``prefix-middle-suffix`` as a DNS-1123 label of at most ``limit`` characters.

    Only ``middle`` (the free-form part, e.g. the job name) is shortened; when it is, an 8-hex hash of the
    whole untruncated name is appended, so two long names never collide and the result is deterministic.
    ``prefix`` and ``suffix`` must already be DNS-safe and short.
    """
    middle = slug(middle)
    parts = [p for p in (prefix, middle, suffix) if p]
    full = "-".join(parts)
    if len(full) <= limit:
        return full
    fixed = len(prefix) + len(suffix) + (1 if prefix else 0) + (1 if suffix else 0)
    room = limit - fixed - 9  # "-" + 8 hex
    if room < 1:
        raise ValueError(f"cannot fit {prefix!r}/{suffix!r} into {limit} characters")
    short = middle[:room].strip("-") or "x"
    parts = [p for p in (prefix, f"{short}-{_hash(full)}", suffix) if p]
    return "-".join(parts)


def label_value(text: str) -> str:
    """A label value (<= 63 chars, alnum at both ends); long values are cut and get a hash suffix."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-_.")
    if len(value) > MAX_NAME:
        value = value[: MAX_NAME - 9].rstrip("-_.") + "-" + _hash(str(text))
    return value


def attempt_selector(job_id: int | str, attempt: int, instance: str) -> dict[str, str]:
    """The labels selecting every object of one job attempt (also the headless Service selector)."""
    return {
        LABEL_MANAGED: "true",
        LABEL_INSTANCE: label_value(instance),
        LABEL_JOB: label_value(str(job_id)),
        LABEL_ATTEMPT: str(attempt),
    }


def labelled_attempt(obj: Mapping[str, Any]) -> tuple[str, int] | None:
    """(job label, attempt number) an object carries, as the sweep compares them; None without both labels."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    job, attempt = labels.get(LABEL_JOB), labels.get(LABEL_ATTEMPT)
    return (job, int(attempt)) if job and attempt and is_digits(attempt) else None


def selector_string(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def instance_selector(instance: str) -> str:
    """Selector for everything one Tidal installation manages on a cluster (watch, orphan sweep)."""
    return selector_string({LABEL_MANAGED: "true", LABEL_INSTANCE: label_value(instance)})
