"""Dispatch throughput against the kmock Kubernetes API emulator, at a configured client QPS.

Scenarios: 1,000 single-pod jobs (2 objects each: parent ConfigMap + Pod) and 50 jobs of 32 pods (34 objects
each: parent, headless Service, 32 Pods). Every scenario gets a fresh emulator in a separate process (so the
mock's CPU does not compete with the dispatcher for the GIL), jobs are dispatched from 16 threads (as
parallel Celery workers would) through ONE client, whose token bucket is the limit being measured.

Prints objects created per second vs the QPS limit; exits 1 if any scenario reaches less than 90 %.

    .venv/bin/python bench/bench_dispatch.py                # QPS 50 and 200, full sizes
    .venv/bin/python bench/bench_dispatch.py --qps 100 --quick
    .venv/bin/python bench/bench_dispatch.py --redis redis://127.0.0.1:6379/0   # the bucket shared in Redis
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusters.kube.client import KubeClient  # noqa: E402
from clusters.kube.dispatch import dispatch  # noqa: E402
from clusters.kube.ratelimit import Backoff, RedisTokenBucket  # noqa: E402
from clusters.kube.render import render  # noqa: E402
from clusters.kube.spec import ClusterSettings, Placement, RenderJob, ReplicaGroup, ReplicaPlacement  # noqa: E402

TARGET = 0.90
NS = "bench"
SETTINGS = ClusterSettings(namespace=NS, instance="bench")


def _serve(queue: multiprocessing.Queue) -> None:
    """Child process: kmock emulator on a random port until terminated."""
    from kmock import KubernetesEmulator, Request, ResourceInfo, Server

    class Emulator(KubernetesEmulator):
        # kmock keeps every request and re-filters the whole history on each new one (O(n^2) over a run).
        # Forgetting a request once it is answered keeps only in-flight ones, so the mock's cost per
        # request is constant; the bench uses no history-based reactions, so behaviour is unchanged.
        async def _handle(self, request: Request) -> web.StreamResponse:
            try:
                return await super()._handle(request)
            finally:
                self._requests.remove(request)

    async def main() -> None:
        async with Emulator() as handler, Server(handler) as server:
            for resource in ("v1/pods", "v1/services", "v1/configmaps", "v1/secrets"):
                handler.resources[resource] = ResourceInfo()  # what kmock makes of {}: no details
            queue.put(str(server.url).rstrip("/"))
            await asyncio.Event().wait()

    asyncio.run(main())


def jobs(count: int, pods_per_job: int) -> list[list[dict]]:
    out = []
    for job_id in range(1, count + 1):
        job = RenderJob(job_id=job_id, name=f"bench-{pods_per_job}", project="bench", namespace=NS, attempt=1,
                        launcher="pytorch", image="train:1",
                        replica_groups=(ReplicaGroup("worker", pods_per_job, 1),))
        placement = Placement(tuple(ReplicaPlacement("worker", i, f"node-{i}") for i in range(pods_per_job)))
        out.append(render(job, placement, SETTINGS))
    return out


def shared_bucket(redis_url: str, qps: float, burst: int) -> RedisTokenBucket | None:
    """The Redis bucket production uses with several workers (a fresh key per scenario), or None."""
    if not redis_url:
        return None
    import redis

    return RedisTokenBucket(redis.Redis.from_url(redis_url), f"tidal-bench:{uuid.uuid4().hex}", qps, burst)


def run(name: str, count: int, pods_per_job: int, qps: float, burst: int, threads: int, redis_url: str = "") -> dict:
    started = time.perf_counter()
    attempts = jobs(count, pods_per_job)
    render_seconds = time.perf_counter() - started
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    server = ctx.Process(target=_serve, args=(queue,), daemon=True)
    server.start()
    try:
        url = queue.get(timeout=30)
        client = KubeClient.from_url(url, pool_size=threads * 8, qps=qps, burst=burst, backoff=Backoff(max_retries=5),
                                     bucket=shared_bucket(redis_url, qps, burst))
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            results = list(pool.map(lambda manifests: dispatch(client, manifests, workers=8), attempts))
        seconds = time.perf_counter() - started
        client.close()
    finally:
        server.terminate()
        server.join(10)
    objects = sum(r.objects for r in results)
    rate = objects / seconds
    return {"scenario": name, "qps": qps, "objects": objects, "seconds": seconds, "rate": rate,
            "ratio": rate / qps, "retries": client.retries, "render_ms_per_job": 1000 * render_seconds / count}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--qps", type=float, nargs="+", default=[50.0, 200.0])
    parser.add_argument("--burst", type=int, default=10, help="token bucket burst (client-go default is 10)")
    parser.add_argument("--threads", type=int, default=16, help="jobs dispatched concurrently")
    parser.add_argument("--quick", action="store_true", help="200 single-pod jobs and 10 x 32 pods")
    parser.add_argument("--redis", default="", metavar="URL", help="limit through the Redis token bucket")
    args = parser.parse_args(argv)
    singles, gangs = (200, 10) if args.quick else (1000, 50)
    rows = []
    for qps in args.qps:
        rows.append(run(f"{singles} jobs x 1 pod", singles, 1, qps, args.burst, args.threads, args.redis))
        rows.append(run(f"{gangs} jobs x 32 pods", gangs, 32, qps, args.burst, args.threads, args.redis))
    header = (f"{'scenario':<20} {'QPS limit':>9} {'objects':>8} {'seconds':>8} {'objects/s':>10} "
              f"{'% of limit':>10} {'retries':>7} {'render ms/job':>13}  ok")
    print(header)
    print("-" * len(header))
    failed = False
    for row in rows:
        ok = row["ratio"] >= TARGET
        failed |= not ok
        print(f"{row['scenario']:<20} {row['qps']:>9.0f} {row['objects']:>8} {row['seconds']:>8.1f} "
              f"{row['rate']:>10.1f} {100 * row['ratio']:>9.1f}% {row['retries']:>7} "
              f"{row['render_ms_per_job']:>13.2f}  {'yes' if ok else 'NO'}")
    where = "a Redis bucket" if args.redis else "an in-process bucket"
    print(f"\ntarget: >= {TARGET:.0%} of the QPS limit (objects created per second, burst {args.burst}, {where})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
