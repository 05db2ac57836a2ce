"""The faults of `make chaos`, one at a time on the running stack: each submits its own jobs, breaks one thing,
waits for the jobs to settle (with a deadline) and checks what must hold (`chaos.invariants`), while two threads
run throughout: one logs metric batches to a run over HTTP and remembers those acknowledged, one samples node and
quota usage."""

from __future__ import annotations

import itertools
import json
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import urllib3
from django.db import DatabaseError, connection

from chaos import invariants
from chaos.kube import FaultProxy, Kubelet, node
from chaos.stack import Stack
from clusters.backends.kubernetes.nodesync import cluster_sync_nodes
from clusters.models import Cluster, FlavorRule
from jobs.models import Job
from jobs.services import job_submit
from jobs.states import State
from quotas.models import Quota, ResourceFlavor
from tenancy.models import Membership, Organization, Project, Role
from tenancy.services import token_create
from tests.clusters.kube.apiserver import Outage
from tests.clusters.kube.conftest import KMockThread
from tracking.services import run_create

T = TypeVar("T")
SETTLE_SECONDS = 150.0


@dataclass
class Result:
    fault: str
    checked: str
    problems: list[str]
    lasted: float  # seconds the fault was in effect
    recovered: float | None  # seconds from the end of the fault to every job settled; None: they never did
    note: str = ""


def db(read: Callable[[], T], seconds: float = 60.0) -> T:
    """`read()`, retried while the database is unreachable (a fault may be restarting it) for up to `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return read()
        except DatabaseError:
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class LogWriter(threading.Thread):
    """Logs a batch of points to one run every 0.2 s through the API; a batch answered 200 is acknowledged and
    must never be lost. Refused or failed batches are counted (they may or may not be stored)."""

    def __init__(self, url: str, token: str, run_id: int) -> None:
        super().__init__(daemon=True)
        self.url, self.run_id = f"{url}/api/v1/runs/{run_id}/log-batch/", run_id
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.acknowledged: list[tuple[int, str, int, int]] = []
        self.failed = 0
        self.stop = threading.Event()
        self._http = urllib3.PoolManager(retries=False, timeout=5.0)

    def run(self) -> None:
        for batch in itertools.count():
            if self.stop.wait(0.2):
                return
            steps = range(batch * 20, batch * 20 + 20)
            points = [{"key": "loss", "value": 1.0 / (step + 1), "step": step} for step in steps]
            try:
                answer = self._http.request("POST", self.url, body=json.dumps({"metrics": points, "attempt": 1}),
                                            headers=self.headers)
            except urllib3.exceptions.HTTPError:
                answer = None
            if answer is not None and answer.status == 200:
                self.acknowledged += [(self.run_id, "loss", step, 1) for step in steps]
            else:
                self.failed += 1


class UsageSampler(threading.Thread):
    """Checks every 0.3 s that no node and no project holds more than it may, and keeps what it found, when."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.found: list[tuple[float, str]] = []
        self.samples = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.3):
            try:
                self.found += [(time.monotonic(), problem) for problem in invariants.within_quotas()]
                self.samples += 1
            except DatabaseError:
                connection.close()
        connection.close()

    def since(self, moment: float) -> list[str]:
        return sorted({problem for at, problem in self.found if at >= moment})


@dataclass
class World:
    """The stack, the fake cluster and what the faults share."""

    stack: Stack
    web: str
    kube: KMockThread
    proxy: FaultProxy
    kubelet: Kubelet
    catalog: dict[str, Any] = field(default_factory=dict)
    writer: LogWriter | None = None
    sampler: UsageSampler | None = None
    checked_until: float = 0.0  # the usage samples up to here were reported with an earlier fault

    def seed(self) -> None:
        """One project with a simulated cluster (4 nodes of 8 A100s, 16 of them its quota) and a Kubernetes one on
        the fake API server (2 nodes of 8 H100s, all of them its quota), a token, and a run to log to."""
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.create_user("chaos", password="chaos-only-password-1")
        organization = Organization.objects.create(name="Chaos", slug="chaos")
        project = Project.objects.create(organization=organization, name="Faults", slug="faults")
        Membership.objects.create(project=project, user=user, role=Role.OWNER)
        a100 = ResourceFlavor.objects.create(name="nvidia-a100-40gb", vendor="nvidia", device_resource="nvidia.com/gpu")
        h100 = ResourceFlavor.objects.create(name="nvidia-h100-80gb", vendor="nvidia", device_resource="nvidia.com/gpu")
        simulated = Cluster.objects.create(name="sim")
        for i in range(4):
            simulated.nodes.create(name=f"sim-{i}", flavor=a100, devices=8, rack=f"r{i // 2}", position=i)
        kube = Cluster(name="gpu", backend=Cluster.Backend.KUBERNETES, qps=1000, burst=1000,
                       namespace_pattern="tidal-{project}", termination_grace_seconds=1)
        kube.set_kubeconfig(self.kubeconfig())
        kube.save()
        FlavorRule.objects.create(pattern="*h100*", flavor=h100)
        for i in range(2):
            self.kube.put("nodes", None, node(f"gpu-{i}", rack=f"k{i}"))
        cluster_sync_nodes(kube)
        Quota.objects.create(project=project, flavor=a100, guaranteed=16, borrow_limit=0)
        Quota.objects.create(project=project, flavor=h100, guaranteed=16, borrow_limit=0)
        _, token = token_create(user=user, name="chaos")
        run = run_create(project=project, name="logged through every fault", user=user)
        self.catalog.update(user=user, project=project, a100=a100, h100=h100, token=token, run=run)

    def kubeconfig(self) -> str:
        return ("apiVersion: v1\nkind: Config\n"
                f"clusters:\n- name: chaos\n  cluster:\n    server: {self.proxy.url}\n"
                "users:\n- name: tidal\n  user:\n    token: chaos-token\n"
                "contexts:\n- name: chaos\n  context:\n    cluster: chaos\n    user: tidal\n"
                "current-context: chaos\n")

    def start_checkers(self) -> None:
        self.writer = LogWriter(self.web, self.catalog["token"], self.catalog["run"].pk)
        self.sampler = UsageSampler()
        self.writer.start()
        self.sampler.start()

    def stop_checkers(self) -> None:
        for thread in (self.writer, self.sampler):
            if thread is not None:
                thread.stop.set()
                thread.join(10)

    # ----------------------------------------------------------------------------------------------- jobs

    def submit(self, flavor: str, count: int, *, devices: int, replicas: int = 1, duration: int | None = None,
               name: str) -> list[int]:
        spec = {"image": "ghcr.io/acme/train:1", "command": ["python", "train.py"], "duration": duration,
                "groups": [{"role": "worker", "replicas": replicas, "devices": devices,
                            "flavor": self.catalog[flavor]}]}

        def one(i: int) -> int:
            pk: int = job_submit(actor=self.catalog["user"], project=self.catalog["project"],
                                 spec={**spec, "name": f"{name}-{i}"}).job.pk
            return pk

        return [db(partial(one, i)) for i in range(count)]

    def states(self, ids: list[int]) -> dict[int, str]:
        return db(lambda: dict(Job.objects.filter(pk__in=ids).values_list("pk", "state")))

    def until(self, condition: Callable[[], T], seconds: float, poll: float = 0.05) -> T | None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(poll)
        return None

    def settle(self, fault: str, ids: list[int], *, started: float, ended: float, note: str = "",
               state: str = State.SUCCEEDED) -> Result:
        """Wait for every job to reach `state`, then check everything."""
        done = self.until(lambda: set(self.states(ids).values()) == {state}, SETTLE_SECONDS, poll=0.2)
        recovered = time.monotonic() - ended if done else None
        expected = dict.fromkeys(ids, state)
        writer, sampler = self.writer, self.sampler
        assert writer is not None and sampler is not None
        problems = [*db(lambda: invariants.settled(expected)), *sampler.since(self.checked_until),
                    *db(lambda: invariants.points_kept(writer.acknowledged))]
        self.checked_until = time.monotonic()
        checked = (f"{len(ids)} jobs {state}, each decided and claimed once; quotas ({sampler.samples} "
                   f"samples); segments; check_consistency; {len(writer.acknowledged)} acknowledged points")
        return Result(fault, checked, problems, ended - started, recovered, note)


# ------------------------------------------------------------------------------------------------- the faults

def worker_killed_mid_dispatch(world: World) -> Result:
    """kill -9 the Celery worker (its pool with it) while it creates an attempt's objects on Kubernetes: claimed,
    some objects there, the others not. The resync re-creates what is missing; the other attempts' dispatch tasks
    died unacknowledged with the worker and are redone by the resync too."""
    world.proxy.latency = 0.3  # each request takes a while: the kill lands between two of them
    ids = world.submit("h100", 2, devices=4, replicas=2, name="worker-kill")

    def half_dispatched() -> str:
        for job_id, job_state in world.states(ids).items():
            objects = [o for o in world.kube.objects("pods") | world.kube.objects("configmaps")
                       if o and f"tidal-{job_id}-" in o[1]]
            if job_state == State.DISPATCHING and 0 < len(objects) < 3:  # parent + 2 pods
                return f"job {job_id} claimed, {len(objects)} of its 3 configmap and pods created"
        return ""

    moment = world.until(half_dispatched, 30, poll=0.02)
    started = time.monotonic()
    world.stack.kill("worker")
    world.proxy.latency = 0.0
    world.stack.start_worker()
    return world.settle("Celery worker kill -9 mid-dispatch (Kubernetes)", ids, started=started,
                        ended=time.monotonic(), note=f"killed with {moment or 'no attempt half-dispatched'}")


def scheduler_leader_killed(world: World) -> Result:
    """kill -9 the scheduler holding the leader lock while its cycle's transaction has written (admissions,
    waits): PostgreSQL rolls it back and frees the lock, the other scheduler decides."""
    ids = world.submit("a100", 10, devices=4, duration=3, name="leader-kill")  # 40 devices for a quota of 16

    def leader_inside_cycle() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                           "WHERE l.locktype = 'advisory' AND l.objid = %s AND l.granted "
                           "AND a.backend_xid IS NOT NULL", [0x7D1A1])
            row = cursor.fetchone()
        return row[0] if row else ""

    leader = world.until(leader_inside_cycle, 30, poll=0.005)
    started = time.monotonic()
    if leader:
        world.stack.kill(leader)
        world.stack.start_scheduler(leader)  # a replacement: two schedulers again
    return world.settle("scheduler leader kill -9 mid-cycle", ids, started=started, ended=time.monotonic(),
                        note=f"killed {leader} inside its cycle, writes uncommitted" if leader
                        else "no cycle caught with uncommitted writes: nothing killed")


def redis_restarted(world: World) -> Result:
    """Redis stops (its queue with it: no persistence) while jobs are submitted and admitted, and comes back 4 s
    later: wake-ups and dispatch tasks queued meanwhile are lost."""
    world.stack.stop_redis()
    started = time.monotonic()
    ids = world.submit("a100", 6, devices=4, duration=3, name="redis")
    time.sleep(4)
    world.stack.start_redis()
    return world.settle("Redis restarted (queue lost)", ids, started=started, ended=time.monotonic())


def postgres_restarted(world: World) -> Result:
    """PostgreSQL crashes (stop -m immediate: sessions cut, no checkpoint) while jobs run and metrics are logged,
    and comes back 5 s later; every process has to reconnect."""
    ids = world.submit("a100", 6, devices=4, duration=4, name="postgres")
    world.until(lambda: State.RUNNING in world.states(ids).values(), 30)
    started = time.monotonic()
    world.stack.stop_postgres(mode="immediate")
    time.sleep(5)
    world.stack.start_postgres()
    return world.settle("PostgreSQL crash and restart", ids, started=started, ended=time.monotonic())


def kube_api_errors(world: World) -> Result:
    """The API server answers every other request 429 (Retry-After: 1) for 8 s, then 500 for 8 s."""
    world.kube.gate.outage = Outage(status=429, every=2)
    started = time.monotonic()
    ids = world.submit("h100", 2, devices=8, name="api-errors")
    time.sleep(8)
    world.kube.gate.outage = Outage(status=500, every=2)
    time.sleep(8)
    world.kube.gate.outage = None
    return world.settle("Kubernetes API 429 then 500 on every other request", ids, started=started,
                        ended=time.monotonic(), note=f"{world.kube.gate.faulted} requests refused")


def kube_api_timeouts(world: World) -> Result:
    """For 20 s every third request is held 31 s, past the client's 30 s timeout (then served: a create the
    client gave up on exists)."""
    world.kube.gate.outage = Outage(delay=31, every=3)
    started = time.monotonic()
    ids = world.submit("h100", 2, devices=8, name="api-timeouts")
    time.sleep(20)
    world.kube.gate.outage = None
    return world.settle("Kubernetes API timing out (every 3rd request held 31 s)", ids, started=started,
                        ended=time.monotonic())


def kube_api_down(world: World) -> Result:
    """The API server is unreachable for 60 s (connections refused, open ones dropped): one job running when it
    goes down finishes meanwhile, one is submitted while it is down."""
    running = world.submit("h100", 1, devices=8, name="api-down-running")
    world.until(lambda: world.states(running)[running[0]] == State.RUNNING, 30)
    started = time.monotonic()
    world.proxy.down()
    waiting = world.submit("h100", 1, devices=8, name="api-down-new")
    time.sleep(60)
    world.proxy.up()
    return world.settle("Kubernetes API down for 60 s", running + waiting, started=started, ended=time.monotonic(),
                        note="the running job finished during the outage")


def watch_cut(world: World) -> Result:
    """Beat stopped (no resync: only the watch sees pods change), then every connection to the API server is cut
    while the jobs run, watch stream included; their pods succeed after the cut."""
    world.stack.kill("beat", signal.SIGTERM)
    ids = world.submit("h100", 2, devices=8, name="watch-cut")
    world.until(lambda: set(world.states(ids).values()) == {State.RUNNING}, 30)
    started = time.monotonic()
    cut = world.proxy.cut()
    result = world.settle("watch stream cut (resync off)", ids, started=started, ended=time.monotonic(),
                          note=f"{cut} connections cut")
    world.stack.start_beat()
    return result


FAULTS = {
    "worker": worker_killed_mid_dispatch,
    "leader": scheduler_leader_killed,
    "redis": redis_restarted,
    "postgres": postgres_restarted,
    "api-errors": kube_api_errors,
    "api-timeouts": kube_api_timeouts,
    "api-down": kube_api_down,
    "watch": watch_cut,
}
