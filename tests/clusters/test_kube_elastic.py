"""Elastic pytorch jobs on Kubernetes (issue 29): torchrun's elastic env, manifests valid against the API schema,
and against kmock (a real HTTP API server emulator) a grow creates the new ranks' pods joining the rendezvous, a
shrink deletes the highest ranks with the termination grace, and the resync neither counts a grow's pods not yet
created nor a shrink's terminating pods against the attempt."""

from __future__ import annotations

import kubernetes_validate
import pytest
from django.utils import timezone

from clusters.kube import names
from clusters.kube.render import render
from clusters.kube.spec import ClusterSettings, Placement, ReplicaPlacement
from jobs import lifecycle
from jobs.models import Attempt, AttemptResize, Job
from jobs.services import job_scale, job_submit
from jobs.states import State
from tests.clusters.kube.test_kube_render import K8S_VERSION, env_of, make_job, pods
from tests.clusters.test_kubernetes_backend import NS, pods_of, refresh, running, seed_nodes, set_status
from tests.jobs.conftest import spec


def test_an_elastic_job_renders_torchruns_elastic_env_and_valid_manifests() -> None:
    groups = (make_job().replica_groups[0].__class__("worker", 2, 8, "16", "128Gi", 0, indexes=(0, 2)),)
    job = make_job(replica_groups=groups, elastic_nodes=(1, 4), max_restarts=5)
    placement = Placement((ReplicaPlacement("worker", 0, "n0"), ReplicaPlacement("worker", 2, "n2")))
    manifests = render(job, placement, ClusterSettings())
    for manifest in manifests:
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
    assert [m["kind"] for m in manifests].count("Service") == 1
    rendered = pods(manifests)
    assert [p["metadata"]["labels"][names.LABEL_INDEX] for p in rendered] == ["0", "2"]
    envs = [env_of(p) for p in rendered]
    master = rendered[0]["spec"]["hostname"]
    for env in envs:
        assert env["PET_NNODES"] == "1:4" and env["PET_RDZV_BACKEND"] == "c10d" and env["PET_MAX_RESTARTS"] == "5"
        assert env["PET_RDZV_ENDPOINT"].startswith(f"{master}.") and env["PET_RDZV_ENDPOINT"].endswith(":29500")
        assert env["PET_RDZV_ID"] == "tidal-1234-2"


def test_one_elastic_pod_still_gets_the_headless_service() -> None:
    job = make_job(replicas=1, elastic_nodes=(1, 3))
    manifests = render(job, Placement((ReplicaPlacement("worker", 0, "n0"),)), ClusterSettings())
    assert any(m["kind"] == "Service" for m in manifests)
    assert ".svc." in env_of(pods(manifests)[0])["PET_RDZV_ENDPOINT"]


def test_a_rigid_job_has_no_elastic_env() -> None:
    job = make_job()
    env = env_of(pods(render(job, Placement(tuple(ReplicaPlacement("worker", i, f"n{i}") for i in range(2))),
                             ClusterSettings()))[0])
    assert env["PET_NNODES"] == "2" and "PET_RDZV_BACKEND" not in env


def test_an_elastic_deepspeed_hostfile_has_a_line_for_every_replica_it_may_grow_to() -> None:
    group = make_job().replica_groups[0].__class__("worker", 2, 4, "16", "128Gi", 0, indexes=(0, 2), max_replicas=4)
    job = make_job("deepspeed", replica_groups=(group,), elastic_nodes=(1, 4), elastic_devices=(4, 16))
    placement = Placement((ReplicaPlacement("worker", 0, "n0"), ReplicaPlacement("worker", 2, "n2")))
    manifests = render(job, placement, ClusterSettings())
    for manifest in manifests:
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
    hostfile = next(m for m in manifests if m["metadata"]["name"].endswith("-hostfile"))["data"]["hostfile"]
    lines = hostfile.splitlines()
    assert [line.split(".", 1)[0].rsplit("-", 1)[1] for line in lines] == ["0", "1", "2", "3"]
    rendered = pods(manifests)
    # Replica 2 is the second pod (rank 1) but keeps its own line: the one a pod grown later never takes.
    assert [(env_of(p)["RANK"], env_of(p)["NODE_RANK"]) for p in rendered] == [("0", "0"), ("1", "2")]
    assert {env_of(p)["ELASTIC_RUN_ID"] for p in rendered} == {"tidal-1234-2"}
    assert {(env_of(p)["TIDAL_ELASTIC_MIN_GPUS"], env_of(p)["TIDAL_ELASTIC_MAX_GPUS"]) for p in rendered} == \
        {("4", "16")}


@pytest.fixture
def elastic_on_kube(tenant, kube_inventory, kube, cycle, resync):
    """An elastic pytorch job (1..3 x 4 H100) admitted at its minimum on kmock and running."""
    seed_nodes(kube)
    body = spec(kube_inventory["h100"], replicas=3, devices=4, resize_cooldown=0, command=["torchrun", "train.py"])
    body["groups"][0]["min_replicas"] = 1
    job = job_submit(actor=tenant.users["member"], project=tenant.project, spec=body).job
    cycle()
    job = refresh(job)
    assert job.state == State.DISPATCHING and len(pods_of(kube, job)) == 1
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    resync()
    job = refresh(job)
    assert job.state == State.RUNNING
    return job


def test_grow_creates_the_new_ranks_pods_joining_the_rendezvous(elastic_on_kube, kube, cycle, resync):
    job = elastic_on_kube
    first = pods_of(kube, job)
    result = cycle()  # the cluster is idle: it grows to its maximum
    assert result.grows
    job = refresh(job)
    attempt = Attempt.objects.get(pk=job.current_attempt_id)
    assert len(attempt.placement) == 3 and job.attempts.count() == 1
    grown = pods_of(kube, job)
    assert set(first) < set(grown) and len(grown) == 3
    endpoints = {env_of(p)["PET_RDZV_ENDPOINT"] for p in grown.values()}
    assert len(endpoints) == 1 and {env_of(p)["PET_NNODES"] for p in grown.values()} == {"1:3"}
    assert {env_of(p)["PET_RDZV_ID"] for p in grown.values()} == {f"tidal-{job.pk}-1"}
    for pod in grown.values():  # as the API server stored them (the emulated kubelet's status left out)
        kubernetes_validate.validate({k: v for k, v in pod.items() if k != "status"}, K8S_VERSION, strict=True)
    assert job.events.filter(kind="note", reason__startswith="created 2 objects").exists()
    for pod in grown.values():
        set_status(kube, pod, running())
    resync()
    assert refresh(job).state == State.RUNNING


def test_a_grows_pods_not_yet_created_are_created_by_the_resync(elastic_on_kube, kube, resync):
    job = elastic_on_kube
    lifecycle.resize(job.pk, attempt_id=job.current_attempt_id, version=0, kind="grow", now=timezone.now(),
                     reason=lifecycle.GROWN_REASON,
                     replicas=[{"role": "worker", "index": 1, "node": "gpu-2", "devices": 4}])  # no task run
    assert len(pods_of(kube, job)) == 1
    resync()
    job = refresh(job)
    assert job.state == State.RUNNING and len(pods_of(kube, job)) == 2


def test_shrink_deletes_the_highest_ranks_with_the_grace(elastic_on_kube, kube, cycle, resync, tenant,
                                                         django_capture_on_commit_callbacks):
    job = elastic_on_kube
    cycle()
    job = refresh(job)
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    with django_capture_on_commit_callbacks(execute=True):
        job_scale(actor=tenant.users["member"], job=Job.objects.get(pk=job.pk), maximum=1)
    left = pods_of(kube, job)
    ranks = sorted(p["metadata"]["labels"][names.LABEL_INDEX] for p in left.values()
                   if not p["metadata"].get("deletionTimestamp"))
    assert ranks == ["0"], ranks
    note = job.events.filter(kind="note", reason__startswith="shrink: deleted 2 pods").get()
    assert "grace of 45s" in note.reason
    pod_deletes = [r for r in kube.handler[kube.handler.action.DELETE] if "/pods/" in r.url.path]
    assert sorted(r.url.path.rsplit("-", 1)[-1] for r in pod_deletes) == ["1", "2"]  # the highest ranks
    assert {r.data["gracePeriodSeconds"] for r in pod_deletes} == {45}  # SIGTERM first: time to checkpoint
    shrink = AttemptResize.objects.get(kind="shrink")
    assert (shrink.old_replicas, shrink.new_replicas) == (3, 1)
    resync()  # the removed ranks' pods (terminating or gone) are no longer the attempt's
    job = refresh(job)
    assert job.state == State.RUNNING and len(Attempt.objects.get(pk=job.current_attempt_id).placement) == 1


def elastic_body(h100, launcher: str) -> dict:
    """DeepSpeed: one group of 1..3 pods; Ray: its head (one pod) and a worker group of 1..2 pods; 4 H100 each."""
    if launcher == "ray":
        body = spec(h100, devices=4, resize_cooldown=0, launcher="ray", command=[],
                    launcher_options={"entrypoint": "python train.py"})
        body["groups"] = [{"role": "head", "replicas": 1, "devices": 4, "flavor": h100},
                          {"role": "worker", "replicas": 2, "min_replicas": 1, "devices": 4, "flavor": h100}]
        return body
    body = spec(h100, replicas=3, devices=4, resize_cooldown=0, launcher="deepspeed",
                command=["deepspeed", "train.py"])
    body["groups"][0]["min_replicas"] = 1
    return body


def all_running(kube, job, resync) -> Job:
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    resync()
    return refresh(job)


@pytest.mark.parametrize("launcher", ["deepspeed", "ray"])
def test_deepspeed_and_ray_grow_into_new_pods_and_shrink_off_the_highest(
        launcher, tenant, kube_inventory, kube, cycle, resync, django_capture_on_commit_callbacks):
    seed_nodes(kube)
    job = job_submit(actor=tenant.users["member"], project=tenant.project,
                     spec=elastic_body(kube_inventory["h100"], launcher)).job
    cycle()
    job = all_running(kube, refresh(job), resync)
    first = pods_of(kube, job)
    assert job.state == State.RUNNING and len(first) == (2 if launcher == "ray" else 1)  # its minimum

    assert cycle().grows  # the cluster is idle: it grows to its maximum
    grown = pods_of(kube, job)
    assert set(first) < set(grown) and len(grown) == 3 and refresh(job).attempts.count() == 1
    for pod in grown.values():  # as the API server stored them (the emulated kubelet's status left out)
        kubernetes_validate.validate({k: v for k, v in pod.items() if k != "status"}, K8S_VERSION, strict=True)
    envs = {name: env_of(pod) for name, pod in grown.items()}
    assert {(e["TIDAL_ELASTIC_MIN_GPUS"], e["TIDAL_ELASTIC_MAX_GPUS"]) for e in envs.values()} == \
        ({("8", "12")} if launcher == "ray" else {("4", "12")})
    if launcher == "deepspeed":
        # Every pod, the grown ones too, starts the elastic agent in the attempt's rendezvous and finds its own
        # line in the hostfile written at dispatch (before the grow).
        hostfile = kube.objects("configmaps")[(NS, f"tidal-{job.pk}-train-a1-hostfile")]["data"]["hostfile"]
        lines = hostfile.splitlines()
        assert len(lines) == 3 and all(line.endswith(" slots=4") for line in lines)
        for name, pod in grown.items():
            command = pod["spec"]["containers"][0]["command"]
            assert command[:2] == ["deepspeed", "--hostfile=/job/hostfile"]
            assert {"--elastic_training", "--min_elastic_nodes=1", "--max_elastic_nodes=3"} <= set(command)
            assert envs[name]["ELASTIC_RUN_ID"] == f"tidal-{job.pk}-1"
            index = pod["metadata"]["labels"][names.LABEL_INDEX]
            assert envs[name]["NODE_RANK"] == index and lines[int(index)].startswith(f"{name}.")
    else:
        # The new worker joins the head's Ray cluster; the head started the entrypoint at the minimum.
        worker = grown[f"tidal-{job.pk}-train-a1-worker-1"]
        script = worker["spec"]["containers"][0]["command"][2]
        assert 'ray start --address="$RAY_ADDRESS"' in script and "trap 'ray stop; exit 0' TERM" in script
        head = envs[f"tidal-{job.pk}-train-a1-head-0"]
        assert envs[worker["metadata"]["name"]]["RAY_ADDRESS"] == head["RAY_ADDRESS"]
        assert head["TIDAL_RAY_NODES"] == "2"
    job = all_running(kube, job, resync)
    assert job.state == State.RUNNING

    with django_capture_on_commit_callbacks(execute=True):
        job_scale(actor=tenant.users["member"], job=Job.objects.get(pk=job.pk), maximum=1)
    pod_deletes = [r for r in kube.handler[kube.handler.action.DELETE] if "/pods/" in r.url.path]
    expected = ["worker-1", "worker-2"] if launcher == "deepspeed" else ["worker-1"]
    assert sorted(r.url.path.split("-a1-", 1)[1] for r in pod_deletes) == expected  # the highest ranks
    assert {r.data["gracePeriodSeconds"] for r in pod_deletes} == {45}  # SIGTERM first: time to checkpoint
    resync()
    job = refresh(job)
    assert job.state == State.RUNNING
    assert len(Attempt.objects.get(pk=job.current_attempt_id).placement) == (2 if launcher == "ray" else 1)


# ------------------------------------------------------------------------------------- the shipped example

def test_the_elastic_example_starts_torchrun_elastic_on_every_pod(tenant, clients):
    from clusters.backends.kubernetes import mapping
    from clusters.demo import seed_cluster
    from clusters.models import Cluster
    from quotas.demo import seed_quotas
    from tests.clusters.test_examples import EXAMPLES, argv_of, dns_name, pods_by_rank

    seed_cluster()
    seed_quotas()
    body = (EXAMPLES / "elastic-ddp.yaml").read_bytes()
    response = clients["member"].post("/api/v1/jobs/", data=body, content_type="application/yaml")
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert response.json()["elastic"]["summary"] == "needs 1..4 workers"
    attempt = Attempt(job=job, number=1, placement=[  # grown to 3 of its 4 nodes
        {"role": "worker", "index": i, "node": f"node-{i}", "devices": 8} for i in range(3)])
    cluster = Cluster(name="gpu", backend=Cluster.Backend.KUBERNETES, cluster_domain="cluster.local")
    manifests = render(*mapping.render_inputs(attempt, cluster))
    ranks = pods_by_rank(manifests)
    assert len(ranks) == 3
    for pod in ranks:
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
        argv, env = argv_of(pod), env_of(pod)
        assert argv[:2] == ["torchrun", "train_elastic.py"]
        assert (env["PET_NNODES"], env["PET_RDZV_BACKEND"], env["PET_MAX_RESTARTS"]) == ("1:4", "c10d", "3")
        assert env["PET_RDZV_ENDPOINT"] == f"{dns_name(ranks[0])}:29500"


def test_the_elastic_training_script_resumes_at_any_world_size(tmp_path):
    import importlib.util
    import os
    import signal

    from tests.clusters.test_examples import EXAMPLES

    loaded = importlib.util.spec_from_file_location("train_elastic", EXAMPLES / "train_elastic.py")
    script = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(script)  # torch is imported only by main()
    for world in (1, 2, 3, 5, 8):  # every sample of a step read once, whatever the world size
        read = [i for rank in range(world) for i in script.shard(7, rank, world, 512)]
        assert read == list(range(7 * 512, 8 * 512))
    assert script.load_state(tmp_path) == 0
    script.save_state(tmp_path, 1234, world=4)
    assert script.load_state(tmp_path) == 1234  # read back by a run of any size
    stop = script.StopRequested().install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.stop
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_a_ray_worker_leaves_the_cluster_on_sigterm(tmp_path):
    """The worker script under bash with a stand-in `ray` (start blocks, stop is recorded): SIGTERM, as a shrink's
    pod delete sends, runs `ray stop` and exits 0 at once instead of waiting for the grace's SIGKILL."""
    import contextlib
    import os
    import signal
    import subprocess
    import time

    from clusters.kube.launchers import Replica, command_for

    fake = tmp_path / "ray"
    fake.write_text(f'#!/bin/sh\nif [ "$1" = stop ]; then echo stopped > {tmp_path}/stopped; exit 0; fi\n'
                    "exec sleep 30\n")
    fake.chmod(0o755)
    job = make_job("ray", replicas=3, devices=2)
    script = command_for(job, Replica("worker", 0, 1, 2, "pod", "dns"))[0][2]
    shell = subprocess.Popen(["bash", "-c", script], env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}",
                                                          "RAY_ADDRESS": "head:6379"}, start_new_session=True)
    try:
        time.sleep(0.5)  # started and blocked
        shell.send_signal(signal.SIGTERM)
        assert shell.wait(timeout=5) == 0
        assert (tmp_path / "stopped").read_text() == "stopped\n"
    finally:
        with contextlib.suppress(ProcessLookupError):  # the stand-in's sleep, which a real `ray stop` would end
            os.killpg(shell.pid, signal.SIGKILL)
