"""Writes of telemetry's configuration: a cluster's source (labels, matchers, on or off), validated and audited."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.errors import DomainError
from telemetry.fields import ConfigError, check_label, check_selector
from telemetry.models import TelemetrySource
from tenancy.audit import delete_audited, save_audited

SOURCE_FIELDS = ("enabled", "pod_label", "namespace_label", "node_label", "gpu_label", "uuid_label",
                 "host_label", "selector")
# Labels a source cannot do without: the node and the GPU's index place every sample; the pod attributes it.
REQUIRED_LABELS = ("pod_label", "node_label", "gpu_label")


def source_save(*, actor: Any, source: TelemetrySource, values: Mapping[str, Any] | None = None) -> TelemetrySource:
    """Change a cluster's source; a label that is not a Prometheus label name, or a selector that is not a list of
    matchers, is a 400 naming the field. Changing what is read does not move the position."""
    for name, value in (values or {}).items():
        if name not in SOURCE_FIELDS:
            raise DomainError(f"{name} is not a setting of a telemetry source.", field=name)
        setattr(source, name, value)
    try:
        for name in SOURCE_FIELDS[1:-1]:
            setattr(source, name, check_label(name, getattr(source, name), required=name in REQUIRED_LABELS))
        source.selector = check_selector(source.selector)
    except ConfigError as exc:
        raise DomainError(exc.message, field=exc.field) from None
    if not isinstance(source.enabled, bool):
        raise DomainError("must be true or false", field="enabled")
    save_audited(actor=actor, obj=source, fields=SOURCE_FIELDS)
    return source


def source_delete(*, actor: Any, source: TelemetrySource) -> None:
    """Stop reading a cluster's telemetry and forget its position (a Kubernetes cluster gets a default source again
    at the next read: disable it to stop reading)."""
    delete_audited(actor=actor, obj=source, fields=("pod_label", "node_label", "gpu_label", "selector"))
