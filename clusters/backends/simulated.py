"""The simulated backend: a fake cluster for `make run`, demos and tests.

Nothing runs: an attempt's replicas "run" TIDAL_SIM_START_DELAY seconds after admission and succeed after the job's
declared `duration`. An elastic job's replicas are its attempt's placement rows: a resize starts or stops them at
once, and its work advances at `r x scaling_efficiency^(r-1)` per second with r replicas (relative to one replica;
`duration` is the seconds it takes at the size it started with), nothing during the RESCALE_PAUSE after a resize.
Failure injection, for trying recovery by hand:
- a job label `sim.tidal.dev/fail-after: "<seconds>"` fails its first attempt that long after it starts
  (`sim.tidal.dev/fail-cause` picks the cause: user_error by default, or e.g. cuda_oom, nccl, image_pull, or a GPU
  fault xid_bus, xid_memory, xid_nvlink), with the log tail, exit code and DCGM Xid event such a failure shows
  (`SIMULATED_FAILURES`), for the failure diagnosis to read;
- a node marked not ready (admin console or API) is lost under every attempt running on it.
The backend only reports what it sees; `jobs.observations.record_observation` decides what follows, exactly as for
Kubernetes (retries, lost nodes, max runtime).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters import selectors
from clusters.backends import redispatch_before
from clusters.models import Cluster
from core.digits import is_digits
from core.errors import DomainError
from jobs.models import Attempt, AttemptResize
from jobs.ports import FollowedLog, Observation, Phase
from jobs.selectors import attempt_with_job
from jobs.services import job_claim_for_dispatch, record_event
from jobs.states import State

logger = logging.getLogger(__name__)

FAIL_AFTER_LABEL = "sim.tidal.dev/fail-after"
FAIL_CAUSE_LABEL = "sim.tidal.dev/fail-cause"
FOLLOW_INTERVAL = 2.0  # seconds between the status lines of a followed replica
RESCALE_PAUSE = 30.0  # seconds an elastic job makes no progress after a resize (rendezvous and restart, as Pollux)


def speed(replicas: int, efficiency: float) -> float:
    """Work per second with `replicas` workers, relative to one: each added worker brings `efficiency` of the last."""
    return replicas * efficiency ** (replicas - 1)


def seconds_of_work(started: datetime, now: datetime, first: int, resizes: Iterable[AttemptResize],
                    efficiency: float) -> float:
    """Seconds of work at the starting size (`first` replicas) done from `started` to `now`, through `resizes`
    (in order): the job succeeds once they reach its duration."""
    base = speed(first, efficiency)
    done, since, replicas = 0.0, started, first
    for resize in resizes:
        at = max(resize.at, since)
        done += (at - since).total_seconds() * speed(replicas, efficiency) / base
        since, replicas = min(at + timedelta(seconds=RESCALE_PAUSE), max(now, at)), resize.new_replicas
    if now > since:
        done += (now - since).total_seconds() * speed(replicas, efficiency) / base
    return done


_NCCL_TIMEOUT = ("[rank{rank}]:[E ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation "
                 "timeout: WorkNCCL(SeqNum=20417, OpType=ALLREDUCE, NumelIn=131072000, NumelOut=131072000, "
                 "Timeout(ms)=600000) ran for 600087 milliseconds before timing out.")
# What an injected failure of each cause looks like: (exit code, last log lines, Xid reported by DCGM or None).
SIMULATED_FAILURES: dict[str, tuple[int, list[str], int | None]] = {
    "user_error": (1, ["step 1200 loss 2.114", "Traceback (most recent call last):",
                       '  File "/workspace/train.py", line 212, in <module>', "    main()",
                       '  File "/workspace/train.py", line 187, in main', "    logits = model(batch['input_ids'])",
                       "KeyError: 'input_ids'"], None),
    "cuda_oom": (1, ["step 40 loss 7.912", "Traceback (most recent call last):",
                     '  File "/workspace/train.py", line 150, in train_step', "    loss.backward()",
                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total "
                     "capacity of 79.15 GiB of which 1.91 GiB is free."], None),
    "nccl": (1, ["NCCL WARN NET/IB : Got completion from peer 10.0.3.17<49152> with error 12, opcode 0, len 0, "
                 "vendor err 129 (Recv)",
                 "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process "
                 "exited or there was a network error, NCCL version 2.21.5"], None),
    "nccl_timeout": (1, [_NCCL_TIMEOUT.format(rank=3)], None),
    "xid_bus": (1, [_NCCL_TIMEOUT.format(rank=5)], 79),
    "xid_memory": (1, ["RuntimeError: CUDA error: uncorrectable ECC error encountered"], 48),
    "xid_nvlink": (1, [_NCCL_TIMEOUT.format(rank=1)], 74),
    "loss_nan": (1, ["step 5120 loss nan", "FloatingPointError: Loss is NaN at step 5120"], None),
    "data_error": (1, ["OSError: [Errno 5] Input/output error: '/datasets/c4/shard-00417.arrow'"], None),
}


class SimulatedBackend:
    log_source = "simulated"

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def cordon(self, node: str, cordoned: bool) -> None:
        """A simulated cluster has no scheduler of its own: the inventory's quarantine is all there is."""

    def dispatch(self, attempt: Attempt) -> None:
        with transaction.atomic():
            job_claim_for_dispatch(attempt, log_location=f"simulated cluster {self.cluster.name}: no container "
                                   "runs, status lines only")

    def resize(self, attempt: Attempt, resize: AttemptResize) -> None:
        """Its replicas are the attempt's placement rows, already changed: the added ones run at once and the
        removed ones are gone at once (no grace). The timeline says so."""
        names = ", ".join(f"{r['role']}-{r['index']}" for r in resize.replicas)
        verb = "started" if resize.kind == AttemptResize.Kind.GROW else "stopped"
        record_event(attempt.job, actor="backend", attempt=attempt.number, now=resize.at,
                     reason=f"simulated cluster {self.cluster.name}: {verb} {names}")

    def stop(self, attempt: Attempt, reason: str) -> None:
        # Nothing runs for real: the attempt's end already released its simulated devices.
        logger.info("simulated stop of job %s attempt %s (%s)", attempt.job_id, attempt.number, reason)

    def observe(self, attempts: Iterable[Attempt]) -> Iterator[Observation]:
        """What each open attempt's clock says; an attempt admitted long ago and never claimed lost its dispatch
        task, and is dispatched now."""
        now = timezone.now()
        stale = redispatch_before()
        lost_nodes = selectors.lost_nodes(self.cluster, now)
        for attempt in attempts:
            if attempt.job.state == State.ADMITTED and attempt.admitted_at <= stale:
                self.dispatch(attempt)
            elif attempt.job.state in (State.DISPATCHING, State.RUNNING):
                yield self._observe(attempt, lost_nodes, now)

    def _observe(self, attempt: Attempt, lost_nodes: frozenset[str], now: datetime) -> Observation:
        job = attempt.job
        lost = tuple(sorted({str(row["node"]) for row in attempt.placement} & lost_nodes))
        details = {"node": lost[0], "rack": self._rack(lost[0])} if lost else {}
        started = attempt.started_at or attempt.admitted_at + timedelta(seconds=settings.TIDAL["SIM_START_DELAY"])
        if now < started:
            return Observation(attempt.pk, Phase.PENDING, "replicas starting (simulated)", lost_nodes=lost,
                               details=details)
        ran = (now - started).total_seconds()
        worked = ran
        if attempt.resize_count:  # an elastic attempt resized since it started
            resizes = list(attempt.resizes.order_by("at", "id"))
            worked = seconds_of_work(started, now, resizes[0].old_replicas, resizes, job.scaling_efficiency)
        fail_after = _label_seconds(job.labels, FAIL_AFTER_LABEL)
        if fail_after is not None and attempt.number == 1 and ran >= fail_after:
            return self._injected(attempt, job.labels.get(FAIL_CAUSE_LABEL, "user_error"), lost, details, now)
        if job.duration is not None and worked >= job.duration:
            return Observation(attempt.pk, Phase.SUCCEEDED, "completed (simulated)", lost_nodes=lost)
        return Observation(attempt.pk, Phase.RUNNING, "all replicas running (simulated)", lost_nodes=lost,
                           details=details)

    def _injected(self, attempt: Attempt, cause: str, lost: tuple[str, ...], details: dict,
                  now: datetime) -> Observation:
        """An injected failure as a real one shows: rank 0's log tail, its exit code, and for a GPU fault the Xid
        DCGM reported on the first replica's node 40 s before."""
        exit_code, lines, xid = SIMULATED_FAILURES.get(cause, (None, [], None))
        first = next(iter(attempt.placement), {"role": "worker", "index": 0, "node": ""})
        node = str(first.get("node") or "")
        details = {**details, "node": details.get("node", node), "replica": f"{first['role']}-{first['index']}"}
        if xid is not None:
            details["xid_events"] = [{"xid": xid, "node": node, "gpu": 3,
                                      "at": (now - timedelta(seconds=40)).isoformat()}]
        return Observation(attempt.pk, Phase.FAILED, "injected failure (simulated)", cause=cause, exit_code=exit_code,
                           lost_nodes=lost, details=details,
                           logs={f"{first['role']}-{first['index']}": lines} if lines else {})

    def _rack(self, node: str) -> str:
        return self.cluster.nodes.filter(name=node).values_list("rack", flat=True).first() or ""

    def logs(self, attempt: Attempt, role: str, index: int, tail: int) -> list[str]:
        return self._lines(attempt, f"{role}-{index}")[-tail:]

    def follow(self, attempt: Attempt, role: str, index: int, tail: int, max_seconds: float,
               after: str | None = None) -> FollowedLog:
        """A simulated replica has no process: its first line (not again when resuming), then a status line every
        FOLLOW_INTERVAL seconds until its attempt ends. The position counts the lines given."""
        if after and not is_digits(after):
            raise DomainError("Not a cursor this server gave: resume with the cursor= of the stream's last line.",
                              field="cursor")
        return StatusLines(self._lines(attempt, f"{role}-{index}")[0], attempt, f"{role}-{index}",
                           given=int(after or 0), max_seconds=max_seconds)

    def _lines(self, attempt: Attempt, replica: str) -> list[str]:
        return [f"[simulated] cluster {self.cluster.name} is simulated: no container runs, so there is no real log.",
                f"[simulated] job {attempt.job_id} attempt {attempt.number} replica {replica} is "
                f"{attempt.job.state}."]


class StatusLines:
    """A followed simulated replica: `first` (unless some lines were given already), then the attempt's state every
    FOLLOW_INTERVAL seconds until it ends or `max_seconds` pass."""

    def __init__(self, first: str, attempt: Attempt, replica: str, *, given: int, max_seconds: float) -> None:
        self.paused = ""
        self._given = given
        self._lines = self._read(first, attempt, replica, max_seconds)

    @property
    def position(self) -> str:
        return str(self._given)

    def __iter__(self) -> Iterator[str]:
        for line in self._lines:
            self._given += 1
            yield line

    def _read(self, first: str, attempt: Attempt, replica: str, max_seconds: float) -> Iterator[str]:
        if self._given == 0:
            yield first
        deadline = time.monotonic() + max_seconds
        while True:
            now = attempt_with_job(attempt.pk)
            if now is None or now.ended_at is not None:
                state = now.job.state if now is not None else "gone"
                yield f"[simulated] job {attempt.job_id} attempt {attempt.number} replica {replica} ended: the job " \
                      f"is {state}."
                return
            yield f"[simulated] job {attempt.job_id} attempt {attempt.number} replica {replica} is {now.job.state}."
            left = deadline - time.monotonic()
            if left <= 0:
                self.paused = f"after {max_seconds:.0f} s"
                return
            time.sleep(min(FOLLOW_INTERVAL, left))


def _label_seconds(labels: dict, label: str) -> float | None:
    try:
        return float(labels[label])
    except (KeyError, TypeError, ValueError):
        return None
