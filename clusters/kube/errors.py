"""Errors of the Kubernetes layer. Each carries a stable ``code`` the Django adapter maps to its hierarchy."""

from __future__ import annotations


class KubeLayerError(Exception):
    """Base class; ``code`` is stable and machine-readable, the message is for people."""

    code = "kube_error"


class RenderError(KubeLayerError, ValueError):
    """The job cannot be turned into manifests (a problem of the job spec, never of the cluster)."""

    code = "invalid_spec"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ReservedEnvError(RenderError):
    """The user's env sets a variable the platform owns."""

    code = "reserved_env"

    def __init__(self, names: list[str]) -> None:
        self.names = sorted(names)
        joined = ", ".join(self.names)
        super().__init__(
            f"environment variable(s) {joined} are reserved by the platform and cannot be set", field="env"
        )


class ParallelismError(RenderError):
    """Megatron tensor x pipeline parallel sizes do not divide the world size."""

    code = "invalid_parallelism"


class PlacementError(RenderError):
    """The placement does not cover every replica exactly once."""

    code = "invalid_placement"


class ApiError(KubeLayerError):
    """A call to the Kubernetes API failed."""

    code = "kube_api_error"

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class PermanentError(ApiError):
    """Retrying will not help (403 forbidden, 422 invalid, 400 bad request, 404 missing namespace ...)."""

    code = "kube_permanent"


class TransientError(ApiError):
    """Retries were exhausted on errors that are usually temporary (429, 5xx, timeouts, connection)."""

    code = "kube_transient"
