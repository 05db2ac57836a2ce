"""Rendered pods against the Pod Security Standards (checker in ``pss.py``, written from the documented controls).

Every launcher meets `restricted` when the job names the non-root uid its image runs as; the documented exceptions
(docs/kubernetes.md, "Pod Security Standards") are exactly: without that uid only `Running as Non-root` fails
(`baseline` admits the pod), and RDMA adds IPC_LOCK, which only `privileged` admits.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from clusters.kube.errors import RenderError
from clusters.kube.render import render
from clusters.kube.spec import ClusterSettings
from tests.clusters.kube.pss import controls, violations
from tests.clusters.kube.test_kube_render import make_job, place, pods

LAUNCHERS = ["pytorch", "deepspeed", "megatron", "ray", "command"]
UID = 1000


def rendered_pods(launcher: str, *, replicas: int = 2, rdma: int = 0, run_as_user: int | None = UID,
                  **kwargs: Any) -> list[dict[str, Any]]:
    job = make_job(launcher, replicas=replicas, rdma=rdma, run_as_user=run_as_user,
                   secret_env={"TIDAL_RUN_TOKEN": "tok"}, **kwargs)
    return pods(render(job, place(job), ClusterSettings(image_pull_secret="regcred")))


@pytest.mark.parametrize(("launcher", "replicas"), list(itertools.product(LAUNCHERS, [1, 4])))
def test_every_launcher_meets_restricted_when_the_job_names_its_uid(launcher: str, replicas: int) -> None:
    for pod in rendered_pods(launcher, replicas=replicas):
        assert violations(pod, "restricted") == []
        assert pod["spec"]["securityContext"]["runAsUser"] == UID


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_without_a_uid_only_running_as_non_root_fails_and_baseline_admits(launcher: str) -> None:
    for pod in rendered_pods(launcher, run_as_user=None):
        assert controls(violations(pod, "restricted")) == {"Running as Non-root"}
        assert violations(pod, "baseline") == []


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_rdma_needs_privileged_for_ipc_lock_and_nothing_else(launcher: str) -> None:
    for pod in rendered_pods(launcher, rdma=1):
        expected = ["Capabilities: container main adds ['IPC_LOCK']"]
        assert violations(pod, "baseline") == expected and violations(pod, "restricted") == expected
        assert violations(pod, "privileged") == []


@pytest.mark.parametrize("uid", [0, -1, True, "1000"])
def test_run_as_user_must_be_a_non_root_uid(uid: object) -> None:
    job = make_job(run_as_user=uid)
    with pytest.raises(RenderError, match="non-root uid") as info:
        render(job, place(job), ClusterSettings())
    assert info.value.field == "launcher_options.run_as_user"
    render(replace(job, run_as_user=None), place(job), ClusterSettings())


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """A mutation setting a dotted path of the pod (``spec.containers.0.securityContext.privileged``)."""
    *parents, last = path.split(".")

    def mutate(pod: dict) -> None:
        node: Any = pod
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        node[int(last) if last.isdigit() else last] = value

    return mutate


def _delete(path: str) -> Callable[[dict], None]:
    *parents, last = path.split(".")

    def mutate(pod: dict) -> None:
        node: Any = pod
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        del node[last]

    return mutate


MAIN = "spec.containers.0"
BREAKS: list[tuple[str, str, Callable[[dict], None]]] = [
    ("baseline", "HostProcess", _set(f"{MAIN}.securityContext.windowsOptions.hostProcess", True)),
    ("baseline", "Host Namespaces", _set("spec.hostNetwork", True)),
    ("baseline", "Host Namespaces", _set("spec.hostIPC", True)),
    ("baseline", "Privileged Containers", _set(f"{MAIN}.securityContext.privileged", True)),
    ("baseline", "Capabilities", _set(f"{MAIN}.securityContext.capabilities.add", ["SYS_ADMIN"])),
    ("baseline", "HostPath Volumes", _set("spec.volumes.0", {"name": "dshm", "hostPath": {"path": "/dev/shm"}})),
    ("baseline", "Host Ports", _set(f"{MAIN}.ports.0.hostPort", 29500)),
    ("baseline", "Host Probes / Lifecycle Hooks", _set(f"{MAIN}.livenessProbe", {"tcpSocket": {
        "host": "10.0.0.1", "port": 29500}})),
    ("baseline", "AppArmor", _set("spec.securityContext.appArmorProfile", {"type": "Unconfined"})),
    ("baseline", "SELinux", _set(f"{MAIN}.securityContext.seLinuxOptions", {"user": "system_u"})),
    ("baseline", "/proc Mount Type", _set(f"{MAIN}.securityContext.procMount", "Unmasked")),
    ("baseline", "Seccomp", _set("spec.securityContext.seccompProfile.type", "Unconfined")),
    ("baseline", "Sysctls", _set("spec.securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}])),
    ("restricted", "Volume Types", _set("spec.volumes.0", {"name": "dshm", "nfs": {"server": "n", "path": "/"}})),
    ("restricted", "Privilege Escalation", _delete(f"{MAIN}.securityContext.allowPrivilegeEscalation")),
    ("restricted", "Running as Non-root", _delete("spec.securityContext.runAsNonRoot")),
    ("restricted", "Running as Non-root", _set(f"{MAIN}.securityContext.runAsNonRoot", False)),
    ("restricted", "Running as Non-root user", _set("spec.securityContext.runAsUser", 0)),
    ("restricted", "Seccomp", _delete("spec.securityContext.seccompProfile")),
    ("restricted", "Capabilities", _set(f"{MAIN}.securityContext.capabilities.drop", ["NET_RAW"])),
    ("restricted", "Capabilities", _set(f"{MAIN}.securityContext.capabilities.add", ["CHOWN"])),
]


@pytest.mark.parametrize(("level", "control", "mutate"), BREAKS, ids=[f"{c}-{i}" for i, (_, c, _) in enumerate(BREAKS)])
def test_the_checker_catches_each_control_broken(level: str, control: str, mutate: Callable[[dict], None]) -> None:
    """The check itself can fail: break one documented control of a compliant pod and it is named."""
    pod = copy.deepcopy(rendered_pods("deepspeed")[0])
    assert violations(pod, "restricted") == []
    mutate(pod)
    assert control in controls(violations(pod, level))
    assert control in controls(violations(pod, "restricted"))  # restricted includes baseline
    if level == "restricted":
        assert violations(pod, "baseline") == []  # and baseline does not ask for it
