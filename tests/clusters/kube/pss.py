"""The Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards), written from their
documented controls: ``violations(pod, "baseline")`` / ``violations(pod, "restricted")`` list what a namespace
enforcing that level would reject, each message starting with the control's documented name.

``restricted`` is cumulative: it includes every ``baseline`` control. Only Linux pods are considered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Pod = dict[str, Any]
Check = Callable[[Pod], Iterator[str]]

BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP",
    "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
RESTRICTED_VOLUME_SOURCES = frozenset({
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"})
CONFINED_SECCOMP = frozenset({"RuntimeDefault", "Localhost"})


# ------------------------------------------------------------------------------------------------------ helpers

def _containers(pod: Pod) -> Iterator[dict[str, Any]]:
    spec = pod["spec"]
    for key in ("containers", "initContainers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _pod_context(pod: Pod) -> dict[str, Any]:
    return pod["spec"].get("securityContext") or {}


def _context(container: dict[str, Any]) -> dict[str, Any]:
    return container.get("securityContext") or {}


def _contexts(pod: Pod) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, securityContext) of the pod and of each container."""
    yield "pod", _pod_context(pod)
    for container in _containers(pod):
        yield f"container {container['name']}", _context(container)


def _probes_and_hooks(container: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        if container.get(key):
            yield container[key]
    yield from (container.get("lifecycle") or {}).values()


# ----------------------------------------------------------------------------------------------------- baseline

def host_process(pod: Pod) -> Iterator[str]:
    for where, context in _contexts(pod):
        if (context.get("windowsOptions") or {}).get("hostProcess"):
            yield f"HostProcess: {where} sets windowsOptions.hostProcess"


def host_namespaces(pod: Pod) -> Iterator[str]:
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod["spec"].get(field):
            yield f"Host Namespaces: spec.{field} is true"


def privileged_containers(pod: Pod) -> Iterator[str]:
    for container in _containers(pod):
        if _context(container).get("privileged"):
            yield f"Privileged Containers: container {container['name']} is privileged"


def capabilities_baseline(pod: Pod) -> Iterator[str]:
    for container in _containers(pod):
        extra = set((_context(container).get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if extra:
            yield f"Capabilities: container {container['name']} adds {sorted(extra)}"


def host_path_volumes(pod: Pod) -> Iterator[str]:
    for volume in pod["spec"].get("volumes") or []:
        if "hostPath" in volume:
            yield f"HostPath Volumes: volume {volume['name']}"


def host_ports(pod: Pod) -> Iterator[str]:
    for container in _containers(pod):
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                yield f"Host Ports: container {container['name']} uses host port {port['hostPort']}"


def host_probes(pod: Pod) -> Iterator[str]:
    for container in _containers(pod):
        for handler in _probes_and_hooks(container):
            for kind in ("httpGet", "tcpSocket"):
                if (handler.get(kind) or {}).get("host"):
                    yield f"Host Probes / Lifecycle Hooks: container {container['name']} sets {kind}.host"


def apparmor(pod: Pod) -> Iterator[str]:
    for where, context in _contexts(pod):
        kind = (context.get("appArmorProfile") or {}).get("type")
        if kind not in (None, "RuntimeDefault", "Localhost"):
            yield f"AppArmor: {where} sets appArmorProfile.type {kind}"
    for key, value in ((pod.get("metadata") or {}).get("annotations") or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
                value == "runtime/default" or value.startswith("localhost/")):
            yield f"AppArmor: annotation {key}={value}"


def selinux(pod: Pod) -> Iterator[str]:
    for where, context in _contexts(pod):
        options = context.get("seLinuxOptions") or {}
        if options.get("type", "") not in SELINUX_TYPES:
            yield f"SELinux: {where} sets type {options['type']}"
        for field in ("user", "role"):
            if options.get(field):
                yield f"SELinux: {where} sets {field}"


def proc_mount(pod: Pod) -> Iterator[str]:
    for container in _containers(pod):
        if _context(container).get("procMount", "Default") != "Default":
            yield f"/proc Mount Type: container {container['name']}"


def seccomp_baseline(pod: Pod) -> Iterator[str]:
    for where, context in _contexts(pod):
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            yield f"Seccomp: {where} is Unconfined"


def sysctls(pod: Pod) -> Iterator[str]:
    for sysctl in _pod_context(pod).get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            yield f"Sysctls: {sysctl['name']}"


BASELINE: tuple[Check, ...] = (host_process, host_namespaces, privileged_containers, capabilities_baseline,
                               host_path_volumes, host_ports, host_probes, apparmor, selinux, proc_mount,
                               seccomp_baseline, sysctls)


# --------------------------------------------------------------------------------------------------- restricted

def volume_types(pod: Pod) -> Iterator[str]:
    for volume in pod["spec"].get("volumes") or []:
        sources = set(volume) - {"name"}
        if not sources <= RESTRICTED_VOLUME_SOURCES:
            yield f"Volume Types: volume {volume['name']} is {sorted(sources - RESTRICTED_VOLUME_SOURCES)}"


def privilege_escalation(pod: Pod) -> Iterator[str]:
    for container in _containers(pod):
        if _context(container).get("allowPrivilegeEscalation") is not False:
            yield f"Privilege Escalation: container {container['name']} does not set allowPrivilegeEscalation false"


def running_as_non_root(pod: Pod) -> Iterator[str]:
    pod_level = _pod_context(pod).get("runAsNonRoot")
    for container in _containers(pod):
        own = _context(container).get("runAsNonRoot")
        if own is False or (own is None and pod_level is not True):
            yield f"Running as Non-root: container {container['name']} may run as root"


def running_as_non_root_user(pod: Pod) -> Iterator[str]:
    for where, context in _contexts(pod):
        if context.get("runAsUser") == 0:
            yield f"Running as Non-root user: {where} sets runAsUser 0"


def seccomp_restricted(pod: Pod) -> Iterator[str]:
    pod_level = (_pod_context(pod).get("seccompProfile") or {}).get("type")
    if pod_level is not None and pod_level not in CONFINED_SECCOMP:
        yield f"Seccomp: pod sets {pod_level}"
    for container in _containers(pod):
        own = (_context(container).get("seccompProfile") or {}).get("type")
        if own is not None and own not in CONFINED_SECCOMP:
            yield f"Seccomp: container {container['name']} sets {own}"
        elif own is None and pod_level not in CONFINED_SECCOMP:
            yield f"Seccomp: container {container['name']} has no RuntimeDefault or Localhost profile"


def capabilities_restricted(pod: Pod) -> Iterator[str]:
    for container in _containers(pod):
        capabilities = _context(container).get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            yield f"Capabilities: container {container['name']} does not drop ALL"
        extra = set(capabilities.get("add") or []) - RESTRICTED_CAPABILITIES
        if extra:
            yield f"Capabilities: container {container['name']} adds {sorted(extra)}"


RESTRICTED: tuple[Check, ...] = (*BASELINE, volume_types, privilege_escalation, running_as_non_root,
                                 running_as_non_root_user, seccomp_restricted, capabilities_restricted)
LEVELS: dict[str, tuple[Check, ...]] = {"privileged": (), "baseline": BASELINE, "restricted": RESTRICTED}


def violations(pod: Pod, level: str) -> list[str]:
    """What a namespace enforcing ``level`` would reject in ``pod``; empty when the pod is admitted."""
    return sorted({message for check in LEVELS[level] for message in check(pod)})


def controls(messages: list[str]) -> set[str]:
    """The controls named by violation messages."""
    return {message.split(":", 1)[0] for message in messages}
