"""What must hold after a fault, read from the database: the checks `make chaos` and tests/faults/ share.

Each function returns the violations it found, in words (an empty list: the invariant holds), so a caller can
report all of them at once instead of stopping at the first.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from django.core.management import CommandError, call_command

from clusters.models import Node
from costs.metering.segments import billed_interval, cluster_grace
from costs.models import UsageSegment
from jobs.models import Attempt, Job, JobEvent
from jobs.states import HOLDING
from quotas.models import Quota
from tracking.points import stored_points


def job_states(expected: Mapping[int, str]) -> list[str]:
    """Every job ended (or stands) in the state expected of it."""
    actual = dict(Job.objects.filter(pk__in=expected).values_list("pk", "state"))
    return [f"job {job_id} is {actual.get(job_id, 'missing')}, expected {state}"
            for job_id, state in sorted(expected.items()) if actual.get(job_id) != state]


def ran_once(job_ids: Iterable[int]) -> list[str]:
    """No decision applied twice: each attempt was admitted once and claimed for dispatch at most once, every
    admission opened exactly one attempt, and a job has at most one open attempt."""
    job_ids = list(job_ids)
    problems = []
    transitions = Counter(JobEvent.objects.filter(job_id__in=job_ids, kind="transition",
                                                  to_state__in=["admitted", "dispatching", "running"])
                          .values_list("job_id", "attempt", "to_state"))
    for (job_id, attempt, state), count in sorted(transitions.items()):
        if count > 1:
            problems.append(f"job {job_id} attempt {attempt} entered {state} {count} times")
    attempts = Counter(Attempt.objects.filter(job_id__in=job_ids).values_list("job_id", flat=True))
    admissions = Counter({job_id: count for (job_id, _, state), count in transitions.items() if state == "admitted"})
    for job_id in sorted(set(attempts) | set(admissions)):
        if attempts[job_id] != admissions[job_id]:
            problems.append(f"job {job_id} has {attempts[job_id]} attempts for {admissions[job_id]} admissions")
    open_ = Counter(Attempt.objects.filter(job_id__in=job_ids, ended_at__isnull=True).values_list("job_id", flat=True))
    problems += [f"job {job_id} has {count} open attempts" for job_id, count in sorted(open_.items()) if count > 1]
    return problems


def within_quotas() -> list[str]:
    """What holding jobs use right now: no node above its devices, no project above guarantee + borrow limit."""
    per_node: Counter[tuple[int | None, str]] = Counter()
    per_quota: Counter[tuple[int, int]] = Counter()
    for job in Job.objects.filter(state__in=HOLDING).select_related("current_attempt"):
        attempt = job.current_attempt
        if attempt is None:
            continue
        per_quota[job.project_id, job.flavor_id] += job.total_devices
        for replica in attempt.placement:
            per_node[attempt.cluster_id, str(replica["node"])] += int(replica["devices"])
    capacity = {(n.cluster_id, n.name): n.devices for n in Node.objects.all()}
    problems = [f"node {node} holds {used} devices of {capacity.get((cluster, node), 0)}"
                for (cluster, node), used in sorted(per_node.items()) if used > capacity.get((cluster, node), 0)]
    limits = {(q.project_id, q.flavor_id): q.guaranteed + q.borrow_limit for q in Quota.objects.all()}
    problems += [f"project {project} holds {used} devices of flavor {flavor}, limit {limits.get((project, flavor), 0)}"
                 for (project, flavor), used in sorted(per_quota.items()) if used > limits.get((project, flavor), 0)]
    return problems


def segments_match(job_ids: Iterable[int]) -> list[str]:
    """Usage is neither lost nor doubled: every attempt that ran has its segments, billed as
    `costs.metering.segments.billed_interval` says (from its start to its end and grace, never ending before it
    starts), and one that never ran has none, so the device-seconds metered equal the device-seconds held. An elastic
    attempt's usage is split at each resize (one segment per device count, no gap, no overlap: the attempt points at
    the last; the others keep its job and number), and what it held is summed over its resize history."""
    job_ids = list(job_ids)
    attempts = list(Attempt.objects.filter(job_id__in=job_ids).select_related("cluster").prefetch_related("resizes"))
    pieces: dict[tuple[int, int], list[UsageSegment]] = defaultdict(list)
    for segment in UsageSegment.objects.filter(job_id__in=job_ids).order_by("start_ts", "id"):
        pieces[segment.job_id, segment.attempt_number].append(segment)
    problems = []
    held = metered = 0
    for attempt in attempts:
        own = pieces.get((attempt.job_id, attempt.number), [])
        name = f"job {attempt.job_id} attempt {attempt.number}"
        billed = billed_interval(attempt, cluster_grace(attempt))
        if billed is None:
            if own:
                problems.append(f"{name} never ran but has a usage segment")
            continue
        if not own:
            problems.append(f"{name} has no usage segment")
            continue
        start, end = billed
        first, last = own[0], own[-1]
        if first.start_ts != start or last.end_ts != end:
            problems.append(f"{name}: segment [{first.start_ts}, {last.end_ts}) but attempt [{start}, {end})")
        if any(a.end_ts != b.start_ts for a, b in zip(own, own[1:], strict=False)):
            problems.append(f"{name}: its segments leave a gap or overlap")
        if any(s.end_ts is not None and s.end_ts < s.start_ts for s in own):
            problems.append(f"{name}: a segment ends before it starts")
        if end is not None and last.end_ts is not None:
            held += _held(attempt, start, end)
            metered += sum((s.end_ts - s.start_ts) * s.devices for s in own if s.end_ts is not None)
    if held != metered:
        problems.append(f"{metered} device-seconds metered for {held} held")
    return problems


def _held(attempt: Attempt, start: int, end: int) -> int:
    """Device-seconds an attempt held from `start` to `end`: its devices before each resize, then after the last."""
    total, since = 0, start
    for resize in sorted(attempt.resizes.all(), key=lambda r: (r.at, r.pk)):
        at = max(since, int(resize.at.timestamp()))
        total += (at - since) * resize.old_devices
        since = at
    return total + (end - since) * sum(int(r["devices"]) for r in attempt.placement)


def consistent() -> list[str]:
    """`manage.py check_consistency` finds nothing (it exits 0): the problems it reports otherwise."""
    out = io.StringIO()
    with contextlib.suppress(CommandError):  # exit 1: the report names the problems
        call_command("check_consistency", "--json", stdout=out)
    return [f"check_consistency: {p['check']}: {p['problem']}" for p in json.loads(out.getvalue())["problems"]]


def points_kept(acknowledged: Iterable[tuple[int, str, int, int]]) -> list[str]:
    """Every point of an acknowledged log batch is stored: (run, key, step, attempt) tuples."""
    wanted: dict[int, set[tuple[str, int, int]]] = defaultdict(set)
    for run_id, key, step, attempt in acknowledged:
        wanted[run_id].add((key, step, attempt))
    problems = []
    for run_id, points in sorted(wanted.items()):
        stored = {(point.key, point.step, point.attempt) for point in stored_points(run_id)}
        missing = points - stored
        if missing:
            problems.append(f"run {run_id}: {len(missing)} acknowledged points missing, e.g. {sorted(missing)[0]}")
    return problems



def settled(expected: Mapping[int, str]) -> list[str]:
    """Every check on jobs that settled after a fault (the log-batch check needs the batches: `points_kept`)."""
    return [*job_states(expected), *ran_once(expected), *within_quotas(), *segments_match(expected), *consistent()]
