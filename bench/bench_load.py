"""Load: Tidal as deployed (gunicorn, a Celery worker and beat, the scheduler loop, on PostgreSQL and Redis, with
the demo's tenants, simulated cluster and quotas) under a steady mix of API traffic from several users' tokens.

    .venv/bin/python bench/bench_load.py [--seconds 60] [--warmup 15] [--scale 1.0] [--workers 3] [--no-surges]
    make soak                                      # the same for 10 minutes

The mix (requests per second, times --scale; arrivals at random, at most --in-flight requests at once):
job submissions 3, cancellations 1, queue reads 2, job lists 1, job reads 4, run lists 0.5, metric batches 4
(POST /api/v1/runs/<id>/log-batch/, 500 points each, half to the runs of one user's running jobs, half to three runs
logged from notebooks, whose series grow all along), cost reports 0.5. The jobs (1 to 16 devices, 2 to 12 simulated
seconds, a tenth of them preemptible, a tenth of high priority) finish, are cancelled or preempted at about the
rate they arrive, so the queue stays short and what grows over a run is history (jobs, events, points, usage), as
in production.

On top of the mix, surges in turn (--no-surges to leave them out): each kind at the rate its benchmark drives it,
closed-loop clients sending their next request as soon as the last one answered, for a third of the memory rule's
window each (20 s in a soak): submissions from 16 users (bench_api.py's 16 clients, target 200 jobs/s), each job
cancelled by its submitter as soon as it is created so the queue stays bounded; the mix's reads from 16 users (the
same 200 requests/s); 10,000-point batches from one client (bench_tracking.py, target 100,000 points/s). Printed:
the rate each reached beside its benchmark's target.

Printed: p50 and p99 per endpoint, errors, CPU seconds of each service, PostgreSQL and the load client beside the
wall time, and the resident memory (RSS) of each service over time. The run fails (exit 1) when:
- any request errs: a status that is neither 2xx nor a 4xx the endpoint answers to a race (409 when cancelling a
  job or logging to a run that finished meanwhile), a timeout or a refused connection; or a service logs an error;
- memory grows: a service's highest RSS in the last window (a minute, or a quarter of a shorter run) exceeds its
  highest in the first window after the warm-up by more than 10 % or 30 MiB, whichever is larger (each window
  holds one turn of the surges, so the two peaks are of the same traffic);
- afterwards, with the services stopped: `manage.py check_consistency` exits non-zero; or replaying the job events
  in the order they were written finds an admission that took a project above its guarantee + borrow limit of a
  flavor or above its running-job cap, a node above its devices, an attempt admitted twice, or a cancelled job
  that moved on.

Uses its own database (`tidal_load` on the local PostgreSQL, or BENCH_LOAD_DATABASE_URL) and Redis database
(redis://127.0.0.1:6379/14, or BENCH_LOAD_REDIS_URL), both emptied first; services log to var/load/.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stack import (  # noqa: E402
    ROOT,
    free_port,
    machine_busy_seconds,
    manage,
    postgres_cpu_seconds,
    process_cpu_seconds,
    process_group_of,
    process_rss_bytes,
    recreate_database,
    server_env,
    start,
    start_gunicorn,
    stop,
    wait_up,
)

LOGS = ROOT / "var" / "load"
MIB = 1024 * 1024
GROWTH_SHARE, GROWTH_FLOOR = 0.10, 30 * MIB  # the memory rule: last window within max(10 %, 30 MiB) of the first
USERS = ("admin", "alice", "bob", "carol", "dave", "erin")  # the demo's staff, owner, admin, member, viewer, outsider
PROJECT_FLAVORS = {"language": ("nvidia-h100-80gb",), "vision": ("nvidia-h100-80gb", "nvidia-a100-40gb"),
                   "robotics": ("nvidia-h100-80gb", "nvidia-a100-40gb")}
HOLDING = ("admitted", "dispatching", "running")
SURGE_USERS = tuple(f"surge-{n:02d}" for n in range(1, 17))  # one user per surging client, as 16 engineers
TOKENS = """
import json
from django.contrib.auth.models import User
from tenancy.models import Project
from tenancy.services import membership_add, token_create
admin = User.objects.get(username="admin")
for name in %r:
    user = User.objects.create_user(name)
    for project in Project.objects.filter(slug__in=%r):
        membership_add(actor=admin, project=project, user=user, role="member")
print(json.dumps({name: token_create(user=User.objects.get(username=name), name="load")[1] for name in %r}))
"""


@dataclass
class Endpoint:
    """One kind of request of the mix and what it answered."""

    name: str
    rate: float  # per second, before --scale
    expected: frozenset[int] = frozenset()  # 4xx answers to a race, not errors
    latencies: list[float] = field(default_factory=list)  # seconds, measured phase only
    answered: Counter = field(default_factory=Counter)  # status -> count, measured phase only
    errors: list[str] = field(default_factory=list)  # every phase
    sent: int = 0  # measured phase

    def accepts(self, status: int) -> bool:
        return 200 <= status < 300 or status in self.expected

    def record(self, seconds: float, status: int | None, problem: str, measured: bool) -> None:
        """One answer (`status` None: none came; `problem` says what went wrong, empty when nothing did)."""
        if problem:
            self.errors.append(problem)
        if measured:
            self.latencies.append(seconds)
            self.answered[status] += 1


@dataclass
class Surge:
    """One kind of traffic driven as its benchmark drives it, for a phase at a time on top of the mix: closed-loop
    clients, each sending its next request as soon as the last one answered."""

    name: str
    clients: int
    target: float  # units per second its benchmark asks for
    unit: str  # what is counted
    benchmark: str  # where the target comes from
    action: Callable[[str], Awaitable[int]]  # one iteration of one client (its user); returns the units done
    done: int = 0  # units, measured phase
    seconds: float = 0.0  # measured seconds spent surging
    latencies: list[float] = field(default_factory=list)  # seconds per iteration, measured phase


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else float("nan")


class Driver:
    """The users of the mix: who submits, cancels, reads and logs what, and what they remember of it."""

    def __init__(self, base: str, tokens: dict[str, str], rng: random.Random, in_flight: int) -> None:
        limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
        self.clients = {user: httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"},
                                                timeout=30, limits=limits) for user, token in tokens.items()}
        self.rng = rng
        self.slots = asyncio.Semaphore(in_flight)
        self.measured = False
        self.jobs: dict[int, str] = {}  # jobs not known to have finished -> who submitted them
        self.cancelled: set[int] = set()  # jobs whose cancellation the API confirmed
        self.runs: list[int] = []  # runs of running jobs, as last listed
        self.notebooks: list[int] = []  # runs logged from outside any job (the SDK in a notebook): never end
        self.steps: dict[int, int] = defaultdict(int)  # next step to log per run
        self.month = datetime.now(UTC).strftime("%Y-%m")
        self.endpoints = {e.name: e for e in (
            Endpoint("POST jobs", 3), Endpoint("POST jobs/<id>/cancel", 1, frozenset({409})),
            Endpoint("GET queue", 2), Endpoint("GET jobs", 1), Endpoint("GET jobs/<id>", 4),
            Endpoint("GET runs", 0.5), Endpoint("POST runs/<id>/log-batch", 4, frozenset({409})),
            Endpoint("GET costs", 0.5))}
        self.actions: dict[str, Callable[[], Awaitable[object]]] = {
            "POST jobs": self.submit, "POST jobs/<id>/cancel": self.cancel, "GET queue": self.queue,
            "GET jobs": self.job_list, "GET jobs/<id>": self.job_read, "GET runs": self.run_list,
            "POST runs/<id>/log-batch": self.log_batch, "GET costs": self.costs}
        self.surges = (
            Surge("submissions", 16, 200, "jobs/s", "bench_api.py: POST /api/v1/jobs/, 16 clients",
                  self.submit_and_cancel),
            Surge("reads", 16, 200, "requests/s", "the API benchmark's rate, 16 clients, the mix's reads",
                  self.read),
            Surge("ingestion", 1, 100_000, "points/s", "bench_tracking.py: 10,000-point batches, 1 client",
                  self.log_big_batch))

    async def open_notebooks(self) -> None:
        for project in PROJECT_FLAVORS:
            response = await self.clients["carol"].post("/api/v1/runs/", json={
                "project": project, "experiment": "notebooks", "name": f"{project}-notebook"})
            response.raise_for_status()
            self.notebooks.append(response.json()["id"])

    async def close(self) -> None:
        for client in self.clients.values():
            await client.aclose()

    async def call(self, name: str, user: str, method: str, url: str, **kwargs: Any) -> httpx.Response | None:
        endpoint = self.endpoints[name]
        measured = self.measured
        started = time.perf_counter()
        try:
            response = await self.clients[user].request(method, url, **kwargs)
        except httpx.HTTPError as error:
            endpoint.record(time.perf_counter() - started, None, f"{url}: {type(error).__name__} {error}", measured)
            return None
        seconds = time.perf_counter() - started
        problem = "" if endpoint.accepts(response.status_code) else \
            f"{method} {url} as {user}: {response.status_code} {response.text[:200]}"
        endpoint.record(seconds, response.status_code, problem, measured)
        return response

    def _pick_job(self) -> tuple[int, str] | None:
        if not self.jobs:
            return None
        recent = list(self.jobs.items())[-300:]
        return self.rng.choice(recent)

    async def submit(self, user: str = "") -> int | None:
        """Submit a job as `user` (by default one of the demo's members and admins); returns its id once created."""
        rng = self.rng
        project = rng.choices(list(PROJECT_FLAVORS), weights=(40, 45, 15))[0]
        replicas, devices = rng.choices([(1, 1), (1, 2), (1, 4), (1, 8), (2, 8)], weights=(40, 25, 20, 10, 5))[0]
        user = user or rng.choices(["carol", "bob", "alice"], weights=(60, 20, 20))[0]
        body = {"project": project, "name": f"load-{rng.randrange(10**6)}", "image": "ghcr.io/acme/train:1",
                "command": ["python", "train.py"], "duration": rng.randint(2, 12), "max_runtime": 600,
                "priority_class": rng.choices(["normal", "high", "preemptible"], weights=(80, 10, 10))[0],
                "groups": [{"role": "worker", "replicas": replicas, "devices": devices,
                            "flavor": rng.choice(PROJECT_FLAVORS[project])}]}
        response = await self.call("POST jobs", user, "POST", "/api/v1/jobs/", json=body)
        if response is None or response.status_code != 201:
            return None
        job: int = response.json()["id"]
        self.jobs[job] = user
        if len(self.jobs) > 2000:
            del self.jobs[next(iter(self.jobs))]
        return job

    async def cancel(self) -> None:
        picked = self._pick_job()
        if picked is None:
            return
        job, submitter = picked
        await self.cancel_job(job, submitter if self.rng.random() < 0.5 else "bob")  # members their own, admins any

    async def cancel_job(self, job: int, user: str) -> None:
        response = await self.call("POST jobs/<id>/cancel", user, "POST", f"/api/v1/jobs/{job}/cancel/")
        if response is not None and response.status_code in (200, 409):
            self.jobs.pop(job, None)
            if response.status_code == 200:
                self.cancelled.add(job)

    async def queue(self, user: str = "") -> None:
        user = user or self.rng.choice(["carol", "dave", "erin"])
        project = self.rng.choice(["", "globex-llm"] if user == "erin" else ["", *PROJECT_FLAVORS])
        await self.call("GET queue", user, "GET", "/api/v1/queue/", params={"project": project} if project else {})

    async def job_list(self, user: str = "dave") -> None:
        project = self.rng.choice(list(PROJECT_FLAVORS))
        await self.call("GET jobs", user, "GET", "/api/v1/jobs/", params={"project": project, "state": "running"})

    async def job_read(self, user: str = "bob") -> None:
        picked = self._pick_job()
        if picked is None:
            return
        response = await self.call("GET jobs/<id>", user, "GET", f"/api/v1/jobs/{picked[0]}/")
        if response is not None and response.status_code == 200 and response.json()["state"] in (
                "succeeded", "failed", "cancelled"):
            self.jobs.pop(picked[0], None)

    async def run_list(self, user: str = "carol") -> None:
        project = self.rng.choice(list(PROJECT_FLAVORS))
        response = await self.call("GET runs", user, "GET", "/api/v1/runs/",
                                   params={"project": project, "status": "RUNNING"})
        if response is not None and response.status_code == 200:
            # The batches are carol's: a job's run takes them from its submitter only (and the project's admins).
            listed = [run["id"] for run in response.json()["results"] if self.jobs.get(run["job"]) == "carol"]
            self.runs = [run for run in self.runs if run not in listed][-50:] + listed

    async def log_batch(self, steps: int = 100, notebooks_only: bool = False) -> bool:
        """`steps` steps of five keys, as carol. Half the batches to the runs of her running jobs (which end: 409 once
        they did), half (or all) to notebooks' runs, whose series grow all along. Returns whether the batch was
        stored."""
        jobs_too = self.runs and not notebooks_only and self.rng.random() < 0.5
        run = self.rng.choice(self.runs if jobs_too else self.notebooks)
        start, self.steps[run] = self.steps[run], self.steps[run] + steps
        now_ms = int(time.time() * 1000)
        metrics = [{"key": key, "value": 1.0 / (step + 1) + self.rng.random() * 0.01, "step": step,
                    "timestamp": now_ms} for key in ("train/loss", "train/lr", "train/tokens_per_s",
                                                     "system/gpu_util", "train/grad_norm")
                   for step in range(start, start + steps)]
        response = await self.call("POST runs/<id>/log-batch", "carol", "POST", f"/api/v1/runs/{run}/log-batch/",
                                   json={"metrics": metrics})
        if response is not None and response.status_code == 409 and run in self.runs:
            self.runs.remove(run)
        return response is not None and 200 <= response.status_code < 300

    async def costs(self, user: str = "") -> None:
        user = user or self.rng.choice(["alice", "erin", "admin"])
        params = {"month": self.month, "group_by": self.rng.choice(["project", "project,flavor", "flavor", ""])}
        if self.rng.random() < 0.5:
            params["step"] = "day"
        await self.call("GET costs", user, "GET", "/api/v1/costs/", params=params)

    async def submit_and_cancel(self, user: str) -> int:
        """A job submitted and cancelled by its submitter at once (a sweep launched by mistake): submissions at the
        API benchmark's rate without the queue growing past what the cluster runs."""
        job = await self.submit(user)
        if job is None:
            return 0
        await self.cancel_job(job, user)
        return 1

    async def read(self, user: str) -> int:
        """One of the mix's reads, in the mix's proportions."""
        reads = (self.queue, self.job_list, self.job_read, self.run_list, self.costs)
        await self.rng.choices(reads, weights=(2, 1, 4, 0.5, 0.5))[0](user)
        return 1

    async def log_big_batch(self, user: str) -> int:
        """10,000 points (2,000 steps of five keys) to a notebook's run, the tracking benchmark's batch."""
        return 10_000 if await self.log_batch(steps=2000, notebooks_only=True) else 0

    async def surge(self, surge: Surge, until: float) -> None:
        """`surge.clients` closed-loop clients, one user each (the batches come from the notebooks' owner)."""
        loop = asyncio.get_running_loop()
        measured, started = self.measured, loop.time()

        async def client(user: str) -> None:
            while loop.time() < until:
                sent = time.perf_counter()
                done = await surge.action(user)
                if measured:
                    surge.done += done
                    surge.latencies.append(time.perf_counter() - sent)

        users = SURGE_USERS[:surge.clients] if surge.clients > 1 else ("carol",)
        await asyncio.gather(*(client(user) for user in users))
        if measured:
            surge.seconds += loop.time() - started

    async def surging(self, until: float, phase: float) -> None:
        """Each surge in turn for `phase` seconds, until `until`."""
        loop = asyncio.get_running_loop()
        for surge in itertools.cycle(self.surges):
            if loop.time() >= until:
                return
            await self.surge(surge, min(until, loop.time() + phase))

    async def _one(self, name: str) -> None:
        try:
            await self.actions[name]()
        finally:
            self.slots.release()

    async def paced(self, name: str, rate: float, until: float) -> None:
        """Requests of one kind arriving at random (a Poisson process) at `rate` per second until `until`; when
        `in_flight` requests are outstanding, the next one waits for a slot."""
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task] = set()
        at = loop.time()
        while True:
            at += self.rng.expovariate(rate)
            if at >= until:
                break
            await asyncio.sleep(max(0.0, at - loop.time()))
            await self.slots.acquire()
            if self.measured:
                self.endpoints[name].sent += 1
            task = asyncio.create_task(self._one(name))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)

    async def drive(self, seconds: float, scale: float, phase: float) -> None:
        """The mix for `seconds`, with the surges in turn on top (`phase` seconds each; none when 0)."""
        until = asyncio.get_running_loop().time() + seconds
        await asyncio.gather(*(self.paced(name, e.rate * scale, until) for name, e in self.endpoints.items()),
                             *([self.surging(until, phase)] if phase else []))


@dataclass
class Sample:
    at: float  # seconds since the measured phase began
    rss: dict[str, int]  # service -> bytes
    queued: int
    holding: int


def job_counts(database_url: str) -> Counter:
    with psycopg.connect(database_url) as conn:
        return Counter(dict(conn.execute("SELECT state, count(*) FROM jobs_job GROUP BY state").fetchall()))


async def sample_memory(services: dict[str, subprocess.Popen], database_url: str, every: float, started: float,
                        samples: list[Sample], stop_at: float) -> None:
    groups = {name: process_group_of(service) for name, service in services.items()}
    while time.monotonic() < stop_at:
        counts = await asyncio.to_thread(job_counts, database_url)
        samples.append(Sample(time.monotonic() - started, {name: process_rss_bytes(group)
                                                           for name, group in groups.items()},
                              counts["queued"], sum(counts[state] for state in HOLDING)))
        await asyncio.sleep(every)


async def run_load(driver: Driver, services: dict[str, subprocess.Popen], args: argparse.Namespace,
                   database_url: str) -> tuple[list[Sample], dict[str, float], float]:
    """Warm up unmeasured, then drive the measured phase while sampling memory; returns the samples, the CPU
    seconds each party spent in the measured phase and its wall seconds."""
    await driver.open_notebooks()
    phase = surge_phase(args)
    # The warm-up takes at least one turn of the surges: every worker's memory has then met the largest requests
    # (10,000-point batches), and the memory rule compares what a service holds from there on.
    await driver.drive(max(args.warmup, len(driver.surges) * phase), args.scale, phase)
    driver.measured = True
    groups = {name: process_group_of(service) for name, service in services.items()}
    meters: dict[str, Callable[[], float]] = {name: partial(process_cpu_seconds, group)
                                              for name, group in groups.items()}
    meters.update(PostgreSQL=postgres_cpu_seconds, client=lambda: sum(os.times()[:2]), machine=machine_busy_seconds)
    before = {name: meter() for name, meter in meters.items()}
    started = time.monotonic()
    window = min(60.0, args.seconds / 4)
    samples: list[Sample] = []
    sampler = asyncio.create_task(sample_memory(services, database_url, min(5.0, window / 6), started, samples,
                                                started + args.seconds))
    await driver.drive(args.seconds, args.scale, phase)
    await sampler
    wall = time.monotonic() - started
    return samples, {name: meter() - before[name] for name, meter in meters.items()}, wall


def surge_phase(args: argparse.Namespace) -> float:
    """Seconds each surge lasts: a third of the memory rule's window, so that every window holds each surge once
    and the first and last windows compare alike."""
    return min(60.0, args.seconds / 4) / 3 if args.surges else 0.0


def memory_verdicts(samples: list[Sample], seconds: float) -> list[tuple[str, float, float, bool]]:
    """(service, first window's peak, last window's peak, within the rule) for each service. Peaks, not medians:
    what a worker holds rises while it parses 10,000-point batches and falls back after, so a window's median
    depends on where its samples fell among the surges, and its peak does not."""
    window = min(60.0, seconds / 4)
    first = [s for s in samples if s.at < window]
    last = [s for s in samples if s.at >= samples[-1].at - window]
    verdicts: list[tuple[str, float, float, bool]] = []
    for name in samples[0].rss:
        before = max(s.rss[name] for s in first)
        after = max(s.rss[name] for s in last)
        verdicts.append((name, before, after, after - before <= max(GROWTH_SHARE * before, GROWTH_FLOOR)))
    return verdicts


def replay_events(database_url: str, cancelled_by_api: set[int]) -> tuple[int, list[str]]:
    """Replay every transition in the order its event was written (event ids: an admission's row is written after
    the cycle read the quotas and jobs it decided on, so an attempt ended by an event written later still held
    its devices when the scheduler looked). At every admission, check what its project and nodes hold against the
    quotas, running-job caps and node sizes (constant during the run). Returns (admissions, problems)."""
    with psycopg.connect(database_url) as conn:
        events = conn.execute(
            "SELECT e.id, e.job_id, e.attempt, e.from_state, e.to_state, j.project_id FROM jobs_jobevent e "
            "JOIN jobs_job j ON j.id = e.job_id WHERE e.kind = 'transition' ORDER BY e.id").fetchall()
        placements = {(job, number): (cluster, placement) for job, number, cluster, placement in conn.execute(
            "SELECT job_id, number, cluster_id, placement FROM jobs_attempt")}
        nodes = {(cluster, name): (devices, flavor) for cluster, name, devices, flavor in conn.execute(
            "SELECT cluster_id, name, devices, flavor_id FROM clusters_node")}
        limits = {(project, flavor): g + b for project, flavor, g, b in conn.execute(
            "SELECT project_id, flavor_id, guaranteed, borrow_limit FROM quotas_quota")}
        projects = {pk: (slug, cap) for pk, slug, cap in conn.execute(
            "SELECT id, slug, max_running_jobs FROM tenancy_project")}
        final: dict[int, str] = dict(conn.execute("SELECT id, state FROM jobs_job WHERE id = ANY(%s)",
                                                  [list(cancelled_by_api)]).fetchall())
    problems = [f"job {job} was cancelled through the API but is {state}" for job, state in final.items()
                if state != "cancelled"]
    holding: dict[tuple[int, int], list[tuple[tuple, int]]] = {}
    admitted: set[tuple[int, int]] = set()
    cancelled: set[int] = set()
    on_node: Counter = Counter()
    of_quota: Counter = Counter()
    running: Counter = Counter()
    for event_id, job, number, source, target, project in events:
        key = (job, number)
        if job in cancelled and target in HOLDING:
            problems.append(f"job {job} went {source} -> {target} after it was cancelled (event {event_id})")
        if target == "cancelled":
            cancelled.add(job)
        if target == "admitted":
            if key in admitted:
                problems.append(f"job {job} attempt {number} admitted twice (event {event_id})")
            admitted.add(key)
            cluster, placement = placements[key]
            held = [((cluster, replica["node"]), replica["devices"]) for replica in placement]
            holding[key] = held
            running[project] += 1
            slug, cap = projects[project]
            if cap is not None and running[project] > cap:
                problems.append(f"event {event_id}: project {slug} runs {running[project]} jobs, cap {cap}")
            for node, devices in held:
                size, flavor = nodes[node]
                on_node[node] += devices
                of_quota[project, flavor] += devices
                if on_node[node] > size:
                    problems.append(f"event {event_id}: node {node[1]} holds {on_node[node]} of {size} devices")
                if of_quota[project, flavor] > limits.get((project, flavor), 0):
                    problems.append(f"event {event_id}: project {slug} holds {of_quota[project, flavor]} devices of "
                                    f"flavor {flavor}, over guarantee + borrow limit "
                                    f"{limits.get((project, flavor), 0)}")
        elif source in HOLDING and target not in HOLDING and key in holding:
            running[project] -= 1
            for node, devices in holding.pop(key):
                on_node[node] -= devices
                of_quota[project, nodes[node][1]] -= devices
    return len(admitted), problems


def logged_errors() -> list[str]:
    """Lines of the services' logs at ERROR or CRITICAL level, or tracebacks."""
    return [f"{log.stem}: {line.strip()}" for log in sorted(LOGS.glob("*.log"))
            for line in log.read_text(errors="replace").splitlines()
            if " ERROR " in line or " CRITICAL " in line or "[CRITICAL]" in line or "[ERROR]" in line
            or line.startswith("Traceback")]


def check_consistency(env: dict) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "manage.py", "check_consistency"], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    return done.returncode, (done.stdout + done.stderr).strip()


def stack_env(database_url: str, redis_url: str) -> dict:
    """As deployed: PostgreSQL with persistent connections, Redis for Celery, the cache and wake-ups, the default
    API throttle."""
    env = server_env(database_url, REDIS_URL=redis_url)
    env.pop("TIDAL_API_THROTTLE_RATE", None)
    return env


def start_services(env: dict, port: int, workers: int) -> dict[str, subprocess.Popen]:
    LOGS.mkdir(parents=True, exist_ok=True)
    for old in LOGS.glob("*"):
        old.unlink()
    python = sys.executable
    return {
        "web": start_gunicorn(env, port, workers, LOGS / "web.log"),
        "worker": start([python, "-m", "celery", "-A", "mlplatform", "worker", "--concurrency", "2",
                         "--loglevel", "WARNING", "--hostname", "load@%h"], env, LOGS / "worker.log"),
        "beat": start([python, "-m", "celery", "-A", "mlplatform", "beat", "--loglevel", "WARNING", "--schedule",
                       str(LOGS / "beat-schedule")], env, LOGS / "beat.log"),
        "scheduler": start([python, "manage.py", "run_scheduler"], env, LOGS / "scheduler.log"),
    }


def report(driver: Driver, samples: list[Sample], cpu: dict[str, float], wall: float,
           args: argparse.Namespace) -> bool:
    """Print the tables; returns whether requests and memory passed."""
    print(f"\n{'endpoint':<26}{'target/s':>9}{'sent/s':>8}{'requests':>9}{'p50 ms':>8}{'p99 ms':>8}"
          f"{'4xx ok':>7}{'errors':>7}")
    total_errors = 0
    for e in driver.endpoints.values():
        raced = sum(count for status, count in e.answered.items() if status in e.expected)
        total_errors += len(e.errors)
        print(f"{e.name:<26}{e.rate * args.scale:>9.1f}{e.sent / wall:>8.1f}{len(e.latencies):>9}"
              f"{percentile(e.latencies, 0.5) * 1000:>8.0f}{percentile(e.latencies, 0.99) * 1000:>8.0f}"
              f"{raced:>7}{len(e.errors):>7}")
    requests = sum(len(e.latencies) for e in driver.endpoints.values())
    print(f"{'all':<26}{sum(e.rate for e in driver.endpoints.values()) * args.scale:>9.1f}"
          f"{requests / wall:>8.1f}{requests:>9}")
    warmup = max(args.warmup, len(driver.surges) * surge_phase(args))
    print(f"\nwall {wall:.0f} s measured (after {warmup:.0f} s of warm-up); CPU seconds: "
          + ", ".join(f"{name} {seconds:.1f}" for name, seconds in cpu.items() if name != "machine")
          + f"; the machine was busy {cpu['machine']:.0f} of {wall * (os.cpu_count() or 1):.0f} core-seconds "
          f"({os.cpu_count()} cores, shared with other work)")
    if any(surge.seconds for surge in driver.surges):
        print(f"\nsurges: one kind at a time driven as its benchmark drives it, on top of the mix, "
              f"{surge_phase(args):.0f} s each in turn")
        print(f"{'surge':<12}{'clients':>8}{'seconds':>8}{'target':>10}{'reached':>10}  {'unit':<11}"
              f"{'p50 ms':>7}{'p99 ms':>7}  benchmark")
        for surge in driver.surges:
            reached = surge.done / surge.seconds if surge.seconds else 0.0
            print(f"{surge.name:<12}{surge.clients:>8}{surge.seconds:>8.0f}{surge.target:>10,.0f}{reached:>10,.0f}  "
                  f"{surge.unit:<11}{percentile(surge.latencies, 0.5) * 1000:>7.0f}"
                  f"{percentile(surge.latencies, 0.99) * 1000:>7.0f}  {surge.benchmark}")
    for error in [error for e in driver.endpoints.values() for error in e.errors][:10]:
        print(f"  error: {error}")
    window = min(60.0, args.seconds / 4)
    print(f"\nresident memory (MiB), sampled every {min(5.0, window / 6):.1f} s; rule: the peak of the last "
          f"{window:.0f} s within max({GROWTH_SHARE:.0%}, {GROWTH_FLOOR // MIB} MiB) of the peak of the first "
          f"{window:.0f} s")
    step = max(1, len(samples) // 10)
    print(f"{'at s':>6}" + "".join(f"{name:>11}" for name in samples[0].rss) + f"{'queued':>8}{'holding':>8}")
    for s in [*samples[::step], *([samples[-1]] if (len(samples) - 1) % step else [])]:
        print(f"{s.at:>6.0f}" + "".join(f"{rss / MIB:>11.0f}" for rss in s.rss.values())
              + f"{s.queued:>8}{s.holding:>8}")
    memory_ok = True
    for name, before, after, ok in memory_verdicts(samples, args.seconds):
        memory_ok &= ok
        print(f"  {name:<10}{before / MIB:>7.0f} -> {after / MIB:>5.0f} MiB ({(after - before) / MIB:+.1f} MiB, "
              f"{after / before - 1:+.1%})  {'ok' if ok else 'GREW'}")
    print(f"\nrequests: {requests}, errors: {total_errors}  {'ok' if not total_errors else 'FAIL'}")
    return memory_ok and not total_errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="measured phase")
    parser.add_argument("--warmup", type=float, default=15,
                        help="unmeasured traffic first (at least one turn of the surges)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every rate of the mix")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers (the best on 2 cores)")
    parser.add_argument("--in-flight", type=int, default=32, help="most requests of the mix outstanding at once")
    parser.add_argument("--surges", action=argparse.BooleanOptionalAction, default=True,
                        help="drive submissions, reads and ingestion in turn as their benchmarks do, on top of the mix")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    database_url = os.environ.get("BENCH_LOAD_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tidal_load")
    redis_url = os.environ.get("BENCH_LOAD_REDIS_URL", "redis://127.0.0.1:6379/14")
    env = stack_env(database_url, redis_url)
    print(f"preparing {database_url.rpartition('/')[2]}: migrate, the demo's tenants, cluster, quotas and cost "
          "history ...", flush=True)
    recreate_database(database_url)
    redis.Redis.from_url(redis_url).flushdb()
    manage(env, "migrate", "-v0")
    manage(env, "seed_demo", "--without-jobs")
    script = TOKENS % (SURGE_USERS, tuple(PROJECT_FLAVORS), USERS + SURGE_USERS)
    tokens = json.loads(manage(env, "shell", "-c", script).strip().splitlines()[-1])
    port = free_port()
    services = start_services(env, port, args.workers)
    print(f"Tidal as deployed: gunicorn ({args.workers} workers), a Celery worker (2 processes) and beat, the "
          f"scheduler loop; PostgreSQL and Redis; {args.seconds:.0f} s of the mix at scale {args.scale}")
    driver = Driver(f"http://127.0.0.1:{port}", tokens, random.Random(args.seed), args.in_flight)

    async def load() -> tuple[list[Sample], dict[str, float], float]:
        try:
            return await run_load(driver, services, args, database_url)
        finally:
            await driver.close()

    try:
        wait_up(f"http://127.0.0.1:{port}/healthz")
        samples, cpu, wall = asyncio.run(load())
        died = {name: service.returncode for name, service in services.items() if service.poll() is not None}
    finally:
        for service in reversed(services.values()):
            stop(service)
    passed = report(driver, samples, cpu, wall, args) and not died
    gone = {name: next((s.at for s in samples if not s.rss[name]), None) for name in died}
    print("services that died during the run: " + (", ".join(
        f"{name} (exit {code}, gone at {gone[name]:.0f} s)" if gone[name] is not None else f"{name} (exit {code})"
        for name, code in died.items()) or "none") + f"  {'ok' if not died else 'FAIL'}")
    print(f"jobs by state: {dict(sorted(job_counts(database_url).items()))}")
    errors = logged_errors()
    for line in errors[:10]:
        print(f"  logged: {line[:300]}")
    print(f"errors logged by the services: {len(errors)}  {'ok' if not errors else 'FAIL'}")
    code, output = check_consistency(env)
    print(f"check_consistency: exit {code}  {'ok' if code == 0 else 'FAIL'}\n  " + output.replace("\n", "\n  "))
    admissions, problems = replay_events(database_url, driver.cancelled)
    for problem in problems[:10]:
        print(f"  {problem}")
    print(f"events replayed: {admissions} admissions against quotas, caps and nodes, {len(driver.cancelled)} "
          f"cancellations confirmed: {len(problems)} problems  {'ok' if not problems else 'FAIL'}")
    passed = passed and not errors and code == 0 and not problems
    print("load: " + ("ok" if passed else "FAIL"))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
