"""`python -m chaos [FAULT ...]` (`make chaos`): start the stack on a private PostgreSQL (port 55432) and Redis
(56379), inject each fault in turn (all of them by default; names in `chaos.faults.FAULTS`), check the invariants
after each, print a table, and exit 1 on any violation. Logs of every process go to var/chaos/."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from urllib.parse import urlparse

from chaos.stack import ENV, ROOT, Stack

WEB_PORT = 58123


def table(results: list) -> str:
    lines = ["| fault | checked after it | result | fault lasted | jobs settled after it |", "|---|---|---|---|---|"]
    for r in results:
        outcome = "ok" if not r.problems else "FAILED: " + "; ".join(r.problems[:5])
        if r.note:
            outcome += f" ({r.note})"
        recovered = f"{r.recovered:.1f} s" if r.recovered is not None else "never (deadline passed)"
        lines.append(f"| {r.fault} | {r.checked} | {outcome} | {r.lasted:.1f} s | {recovered} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("faults", nargs="*", help="only these faults (default: all)")
    args = parser.parse_args()
    os.environ.update(ENV)  # the driver reads and seeds the same database the stack uses
    import django

    django.setup()
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # the fake API server's every request
    from chaos.faults import FAULTS, World
    from chaos.kube import FaultProxy, Kubelet
    from tests.clusters.kube.conftest import KMockThread

    unknown = set(args.faults) - set(FAULTS)
    if unknown:
        parser.error(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
    stack = Stack(ROOT / "var" / "chaos")
    kube = KMockThread()
    world = None
    results = []
    began = time.monotonic()
    try:
        print("== private PostgreSQL and Redis, migrate, seed", flush=True)
        stack.start_postgres(fresh=True)
        stack.start_redis()
        migrated = stack.manage("migrate", "--noinput")
        if migrated.returncode:
            print(migrated.stdout, migrated.stderr, file=sys.stderr)
            return 1
        kube.start()
        kube_port = urlparse(kube.url).port
        assert kube_port is not None, kube.url  # the emulator's own URL, with the port it listens on
        proxy = FaultProxy(kube_port)
        kubelet = Kubelet(kube)
        kubelet.start()
        world = World(stack, f"http://127.0.0.1:{WEB_PORT}", kube, proxy, kubelet)
        world.seed()
        print("== web, worker, beat, two schedulers, reconciler", flush=True)
        stack.start_web(WEB_PORT)
        stack.start_worker()
        stack.start_beat()
        stack.start_scheduler("scheduler-1")
        stack.start_scheduler("scheduler-2")
        stack.start_reconciler()
        world.start_checkers()
        for name, fault in FAULTS.items():
            if args.faults and name not in args.faults:
                continue
            print(f"== {name}", flush=True)
            result = fault(world)
            print(f"   {'ok' if not result.problems else 'FAILED'}"
                  f"{'' if result.recovered is None else f', settled {result.recovered:.1f} s after the fault'}"
                  f"{', ' + result.note if result.note else ''}", flush=True)
            for problem in result.problems:
                print(f"   - {problem}", flush=True)
            results.append(result)
    finally:
        if world is not None:
            world.stop_checkers()
        stack.close()
        kube.stop()
    print(f"\n{table(results)}\n\n{len(results)} faults in {time.monotonic() - began:.0f} s; logs in var/chaos/")
    if world is not None and world.writer is not None:
        print(f"log batches: {len(world.writer.acknowledged) // 20} acknowledged, {world.writer.failed} refused or "
              "failed during faults")
    return 1 if any(r.problems or r.recovered is None for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
