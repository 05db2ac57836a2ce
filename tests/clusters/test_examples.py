"""Every shipped example in sdk/examples/, submitted as written through the API (YAML), rendered for a Kubernetes
cluster: each pod's command must be what its launcher needs on one node of a multi-node job.

The commands are read the way the programs read them: Kubernetes expands ``$(VAR)`` from the container's env, then
torchrun (whose options default to ``PET_<OPTION>``) or the DeepSpeed runner parses its argv. The parsers below
declare only the options these checks read, with the programs' own names and defaults.
"""

from __future__ import annotations

import argparse
import posixpath
import re
from pathlib import Path
from typing import Any

import pytest

from clusters.backends.kubernetes import mapping
from clusters.demo import seed_cluster
from clusters.kube.render import render
from clusters.models import Cluster
from jobs.models import Attempt, Job
from quotas.demo import seed_quotas
from tests.clusters.kube.pss import violations

EXAMPLES = Path(__file__).resolve().parents[2] / "sdk" / "examples"
CLUSTER_DOMAIN = "cluster.local"


@pytest.fixture
def submit_example(tenant, clients):
    """POST an example file as the CLI does (Content-Type: application/yaml) into the demo catalog."""
    seed_cluster()
    seed_quotas()

    def submit(filename: str) -> Job:
        body = (EXAMPLES / filename).read_bytes()
        response = clients["member"].post("/api/v1/jobs/", data=body, content_type="application/yaml")
        assert response.status_code == 201, response.content
        return Job.objects.get(pk=response.json()["id"])

    return submit


def rendered(job: Job) -> list[dict[str, Any]]:
    """The job's manifests on a Kubernetes cluster, each replica placed on a node of its own."""
    groups = list(job.groups.all())
    attempt = Attempt(job=job, number=1, placement=[
        {"role": g.role, "index": i, "node": f"node-{g.role}-{i}", "devices": g.devices}
        for g in groups for i in range(g.replicas)])
    cluster = Cluster(name="gpu", backend=Cluster.Backend.KUBERNETES, cluster_domain=CLUSTER_DOMAIN)
    return render(*mapping.render_inputs(attempt, cluster))


def pods_by_rank(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pods = [m for m in manifests if m["kind"] == "Pod"]
    return sorted(pods, key=lambda pod: int(pod["metadata"]["labels"]["tidal.dev/rank"]))


def dns_name(pod: dict[str, Any]) -> str:
    """How the other pods reach this one: <hostname>.<subdomain>.<namespace>.svc.<domain> (headless Service)."""
    spec = pod["spec"]
    return f"{spec['hostname']}.{spec['subdomain']}.{pod['metadata']['namespace']}.svc.{CLUSTER_DOMAIN}"


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"] if "value" in e}


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of a command or arg: $(NAME) from the container's env; $$ is a literal $."""
    def one(match: re.Match[str]) -> str:
        return "$" if match.group(0) == "$$" else env.get(match.group(1), match.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, text)


def argv_of(pod: dict[str, Any]) -> list[str]:
    container, env = pod["spec"]["containers"][0], env_of(pod)
    return [expand(part, env) for part in [*container["command"], *container.get("args", [])]]


def torchrun_view(argv: list[str], env: dict[str, str]) -> argparse.Namespace:
    """torchrun's reading of its argv on this pod: each option (either spelling) defaults to PET_<OPTION>."""
    parser = argparse.ArgumentParser(prog="torchrun")
    for dest in ("nnodes", "nproc_per_node", "node_rank", "master_addr", "master_port"):
        parser.add_argument(f"--{dest.replace('_', '-')}", f"--{dest}", dest=dest,
                            default=env.get(f"PET_{dest.upper()}"))
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def deepspeed_view(argv: list[str]) -> argparse.Namespace:
    """The DeepSpeed runner's reading of its argv (its defaults: /job/hostfile, ssh to every host, rank -1)."""
    parser = argparse.ArgumentParser(prog="deepspeed")
    parser.add_argument("-H", "--hostfile", default="/job/hostfile")
    parser.add_argument("--no_ssh", action="store_true")
    parser.add_argument("--node_rank", type=int, default=-1)
    parser.add_argument("--master_addr", default="")
    parser.add_argument("--master_port", type=int, default=29500)
    parser.add_argument("user_script")
    parser.add_argument("user_args", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def mounted_file(pod: dict[str, Any], manifests: list[dict[str, Any]], path: str) -> str:
    """The text a container reads at ``path`` from a ConfigMap volume of the attempt."""
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    for mount in pod["spec"]["containers"][0]["volumeMounts"]:
        directory, key = posixpath.split(path)
        if mount["mountPath"] == directory and "configMap" in volumes[mount["name"]]:
            name = volumes[mount["name"]]["configMap"]["name"]
            return next(m for m in manifests if m["metadata"]["name"] == name)["data"][key]
    raise AssertionError(f"nothing is mounted at {path}")


@pytest.mark.parametrize("example", ["pytorch-ddp.yaml", "megatron.yaml"])
def test_torchrun_examples_start_torchrun_with_its_node_flags_on_every_pod(submit_example, example) -> None:
    job = submit_example(example)
    pods = pods_by_rank(rendered(job))
    devices = {g.role: g.devices for g in job.groups.all()}
    assert len(pods) > 1  # a multi-node example
    for rank, pod in enumerate(pods):
        argv = argv_of(pod)
        assert posixpath.basename(argv[0]) == "torchrun", argv  # not one plain python process per pod
        view = torchrun_view(argv[1:], env_of(pod))
        role = pod["metadata"]["labels"]["tidal.dev/role"]
        assert (view.nnodes, view.nproc_per_node, view.node_rank) == (str(len(pods)), str(devices[role]), str(rank))
        assert (view.master_addr, view.master_port) == (dns_name(pods[0]), "29500")
        assert view.training_script.endswith(".py") and view.training_script_args == job.args


def test_deepspeed_example_starts_only_its_own_node_on_every_pod(submit_example) -> None:
    job = submit_example("deepspeed.yaml")
    manifests = rendered(job)
    pods = pods_by_rank(manifests)
    assert len(pods) > 1
    for rank, pod in enumerate(pods):
        argv = argv_of(pod)
        assert posixpath.basename(argv[0]) == "deepspeed", argv
        view = deepspeed_view(argv[1:])
        assert view.no_ssh and view.node_rank == rank  # without them every pod would launch the whole job
        assert (view.master_addr, view.master_port) == (dns_name(pods[0]), 29500)
        hosts = [line.split() for line in mounted_file(pod, manifests, view.hostfile).splitlines()]
        assert hosts == [[dns_name(p), "slots=8"] for p in pods]  # every node, in rank order, 8 processes each
        assert (view.user_script, view.user_args) == ("finetune.py", job.args)


def test_ray_example_head_runs_the_entrypoint_and_workers_join_it(submit_example) -> None:
    job = submit_example("ray.yaml")
    head, *workers = pods_by_rank(rendered(job))
    script = argv_of(head)[2]
    assert argv_of(head)[:2] == ["bash", "-c"] and "ray start --head" in script
    assert script.rstrip().endswith(job.launcher_options["entrypoint"])
    for worker in workers:
        assert env_of(worker)["RAY_ADDRESS"] == f"{dns_name(head)}:6379"
        assert 'ray start --address="$RAY_ADDRESS"' in argv_of(worker)[2]
    for pod in (head, *workers):  # the example names the image's non-root uid
        assert violations(pod, "restricted") == []


def test_tracked_training_example_runs_one_plain_process_of_the_experiment(submit_example) -> None:
    """One pod runs `python train_tiny.py` itself (no launcher in between) as rank 0, so the SDK logs from it."""
    job = submit_example("tracked-training.yaml")
    assert job.experiment == "tiny-mlp"
    (pod,) = pods_by_rank(rendered(job))
    assert argv_of(pod) == ["python", "train_tiny.py", *job.args]
    assert env_of(pod).get("RANK", "0") == "0"
    assert (EXAMPLES / "train_tiny.py").exists()
