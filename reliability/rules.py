"""Failure diagnosis as data: rules (pattern, source, cause class, confidence, action) and `diagnose`. Pure.

Evidence of a failed attempt comes from several sources (`SOURCES`): the replicas' last log lines, the pods'
termination reasons, the exit code, GPU Xid events (DCGM / the kernel's NVRM lines), node conditions, Kubernetes
events, tracking alerts (NaN loss...), the run's progress (hang detection), the attempt's outcome and the cause the
backend classified first. A rule matches one source:

- `log`, `reason`, `node_condition`, `k8s_event`, `alert`, `progress`, `outcome`, `cause`: a regular expression
  searched in each item (case-insensitive);
- `exit_code`, `xid`: a regular expression matched against the whole number (`79`, `48|94|95`, `1\\d{0,2}`).

Every matching rule votes for its cause class with its confidence; the class with the highest vote wins (a few
corroborating matches from other sources raise it a little), ties going to the rule listed first. So a root cause
outranks its symptoms: an Xid 79 (0.97) beats the NCCL timeout it caused (0.85), which beats the Python traceback
the timeout raised (0.55). The diagnosis keeps the winning class's evidence (log lines with their numbers, the
reason, the exit code, the Xid events with node and GPU) and the recommended action of its strongest rule.

The classes and whether each is retried are `jobs.failures`' one table; `rules` only says which class evidence
points to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from jobs.failures import BY_NAME as CAUSES_BY_NAME

LOG, REASON, EXIT_CODE, XID, NODE_CONDITION, K8S_EVENT, ALERT, PROGRESS, OUTCOME, CAUSE = (
    "log", "reason", "exit_code", "xid", "node_condition", "k8s_event", "alert", "progress", "outcome", "cause")
SOURCES = (LOG, REASON, EXIT_CODE, XID, NODE_CONDITION, K8S_EVENT, ALERT, PROGRESS, OUTCOME, CAUSE)
# Sources whose pattern must match the whole value (numbers), not somewhere in a line.
WHOLE_VALUE = frozenset({EXIT_CODE, XID})

# Quarantine of the node an Xid came from: at once, or counted towards TIDAL_QUARANTINE_FAILURES in the window.
QUARANTINE_NOW, QUARANTINE_COUNT = "now", "count"

ACTIONS: dict[str, str] = {
    "fix_code": "Fix the error in the training code (see the traceback); not retried.",
    "reduce_gpu_memory": "Reduce the batch size or sequence length, or enable activation checkpointing / sharding.",
    "raise_memory_request": "Raise the replicas' memory request, or lower data loader workers / prefetching.",
    "retry_elsewhere": "Retried from the last checkpoint on other nodes; nothing to change in the job.",
    "quarantine_node": "Node quarantined for hardware checks; retried from the last checkpoint on other nodes.",
    "check_network": "Retried from the last checkpoint on other nodes; check the fabric (IB/RoCE links, switches) "
                     "if it repeats.",
    "restart_from_checkpoint": "Restart from the last checkpoint (automatic where the project or job opts in).",
    "lower_lr": "Lower the learning rate, add gradient clipping, or skip the bad batch, then resume from a "
                "checkpoint before the divergence.",
    "check_data": "Check the dataset path, credentials and the storage's health; the loader's error is in the log.",
    "fix_image": "Fix the image name or tag, or the registry credentials (image pull secret).",
    "fix_spec": "Fix the job's configuration (command, secrets, config maps, volumes) and submit again.",
    "raise_max_runtime": "Raise the job's max runtime, or checkpoint and resume in shorter jobs.",
    "none": "Nothing to do: the platform or a user ended it on purpose.",
    "investigate": "No known pattern matched; read the log tail and the events.",
}


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: str
    source: str
    cause: str
    confidence: float
    action: str
    name: str = ""
    quarantine: str = ""  # QUARANTINE_NOW / QUARANTINE_COUNT for a node-level hardware fault
    # A log rule only: a pattern one of the CONTEXT_LINES lines before the match must match (what the process was
    # doing when it died: a segfault right after NCCL's network plugin loaded is NCCL's, not the user's).
    context: str = ""


CONTEXT_LINES = 5


@dataclass(frozen=True, slots=True)
class XidEvent:
    xid: int
    node: str = ""
    gpu: str = ""  # index or UUID
    message: str = ""
    seconds_before_end: float | None = None


@dataclass(frozen=True)
class Evidence:
    """Everything known of a failed attempt. `logs` is replica -> its last lines (oldest first) and `first_line`
    replica -> the number of its first kept line (1 by default)."""

    logs: Mapping[str, Sequence[str]] = field(default_factory=dict)
    first_line: Mapping[str, int] = field(default_factory=dict)
    reasons: Sequence[str] = ()
    exit_code: int | None = None
    xids: Sequence[XidEvent] = ()
    node_conditions: Sequence[str] = ()
    k8s_events: Sequence[str] = ()
    alerts: Sequence[str] = ()
    progress: Sequence[str] = ()
    outcome: str = ""
    cause: str = ""  # what the backend classified first


@dataclass(frozen=True, slots=True)
class Item:
    """One piece of evidence: its source, the text (a log line, a reason, a number), where it was (replica and
    line number for a log line, node and GPU for an Xid) and the rule it matched ("" for context)."""

    source: str
    text: str
    replica: str = ""
    line: int | None = None
    node: str = ""
    rule: str = ""

    def as_dict(self) -> dict[str, object]:
        return {key: value for key, value in (("source", self.source), ("text", self.text),
                                              ("replica", self.replica), ("line", self.line),
                                              ("node", self.node), ("rule", self.rule)) if value not in ("", None)}


@dataclass(frozen=True)
class Diagnosis:
    cause: str
    confidence: float
    evidence: tuple[Item, ...]
    action: str  # a key of ACTIONS
    summary: str
    quarantine: str = ""  # QUARANTINE_NOW / QUARANTINE_COUNT / ""
    nodes: tuple[str, ...] = ()  # the nodes the evidence names (Xid events, node conditions)

    @property
    def action_text(self) -> str:
        return ACTIONS.get(self.action, self.action)


def _r(pattern: str, source: str, cause: str, confidence: float, action: str, name: str,
       quarantine: str = "", context: str = "") -> Rule:
    return Rule(pattern, source, cause, confidence, action, name, quarantine, context)


# The built-in rules, most specific first (ties go to the earlier rule).
BUILTIN: tuple[Rule, ...] = (
    # --- the platform's own verdicts: the attempt's outcome and the causes only Tidal decides
    _r(r"^cancelled$", OUTCOME, "cancelled", 1.0, "none", "outcome-cancelled"),
    _r(r"^preempted$", OUTCOME, "preempted", 1.0, "retry_elsewhere", "outcome-preempted"),
    _r(r"^max_runtime$", CAUSE, "max_runtime", 1.0, "raise_max_runtime", "cause-max-runtime"),
    _r(r"^(unschedulable|pending_timeout)$", CAUSE, "", 0.6, "retry_elsewhere", "cause-pending"),
    # --- GPU Xid events (DCGM_FI_DEV_XID_ERRORS, NVRM kernel lines): the root cause when present
    _r(r"79", XID, "xid_bus", 0.97, "quarantine_node", "xid-79", QUARANTINE_NOW),
    _r(r"48|94|95", XID, "xid_memory", 0.96, "quarantine_node", "xid-ecc", QUARANTINE_NOW),
    _r(r"63|64|92", XID, "xid_memory", 0.9, "retry_elsewhere", "xid-row-remap", QUARANTINE_COUNT),
    _r(r"74", XID, "xid_nvlink", 0.93, "retry_elsewhere", "xid-74", QUARANTINE_COUNT),
    _r(r"13|31|43", XID, "xid_app", 0.7, "fix_code", "xid-app"),
    _r(r"NVRM: Xid \([^)]*\): 79\b|GPU has fallen off the bus", LOG, "xid_bus", 0.95, "quarantine_node",
       "log-xid-79", QUARANTINE_NOW),
    _r(r"NVRM: Xid \([^)]*\): (48|94|95)\b|uncorrectable ECC error|double bit ECC|DBE \(double bit error\)",
       LOG, "xid_memory", 0.93, "quarantine_node", "log-ecc", QUARANTINE_NOW),
    _r(r"NVRM: Xid \([^)]*\): (63|64|92)\b|row remapp", LOG, "xid_memory", 0.88, "retry_elsewhere",
       "log-row-remap", QUARANTINE_COUNT),
    _r(r"NVRM: Xid \([^)]*\): 74\b|NVLink error|nvlink.*(fatal|error)", LOG, "xid_nvlink", 0.9,
       "retry_elsewhere", "log-nvlink", QUARANTINE_COUNT),
    _r(r"NVRM: Xid \([^)]*\): (13|31|43)\b|CUDA error: an illegal memory access|illegal instruction was "
       r"encountered|unspecified launch failure|misaligned address", LOG, "xid_app", 0.72, "fix_code",
       "log-xid-app"),
    # --- accelerator memory
    _r(r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|"
       r"HIP out of memory|NPU out of memory|RESOURCE_EXHAUSTED: Out of memory", LOG, "cuda_oom", 0.92,
       "reduce_gpu_memory", "log-cuda-oom"),
    # --- host memory
    _r(r"^OOMKilled$", REASON, "host_oom", 0.95, "raise_memory_request", "reason-oomkilled"),
    _r(r"^Evicted.*memory|The node was low on resource: memory", REASON, "host_oom", 0.9,
       "raise_memory_request", "reason-evicted-memory"),
    _r(r"OOMKilling|Memory cgroup out of memory|oom-kill|OOMKilled", K8S_EVENT, "host_oom", 0.9,
       "raise_memory_request", "event-oom"),
    _r(r"Killed process \d+ .*total-vm|Out of memory: Killed process|oom-kill:", LOG, "host_oom", 0.85,
       "raise_memory_request", "log-oom-killer"),
    _r(r"137", EXIT_CODE, "host_oom", 0.35, "raise_memory_request", "exit-137"),
    # --- NCCL: a collective's watchdog timeout, and communication errors
    _r(r"Watchdog caught collective operation timeout|collective operation timeout|ran for \d+ milliseconds "
       r"before timing out|NCCL.*[Tt]imeout|Timed out waiting .* for (the )?(store|NCCL|collective)|"
       r"ProcessGroupNCCL.*timed? ?out|DistStoreError: .*timeout|Socket Timeout", LOG, "nccl_timeout", 0.86,
       "check_network", "log-nccl-timeout"),
    _r(r"NCCL error|ncclSystemError|ncclRemoteError|ncclInternalError|ncclUnhandledCudaError|"
       r"NCCL WARN (NET|Call to|Net|IB|Socket)|NET/IB.*(error|failed)|NET/Socket.*(error|failed)|"
       r"ibv_\w+ failed|transport retry counter exceeded|IBV_WC_RETRY_EXC_ERR|Connection reset by peer|"
       r"DistNetworkError|HCCL.*(error|failed)|RDMA.*(error|failed)|Got completion .* with error", LOG, "nccl", 0.8,
       "check_network", "log-nccl-error"),
    _r(r"DistBackendError|ProcessGroupNCCL|NCCL communicator was aborted", LOG, "nccl", 0.7, "check_network",
       "log-nccl-generic"),
    _r(r"Segmentation fault|SIGSEGV|SIGBUS|Bus error", LOG, "nccl", 0.6, "check_network", "log-nccl-crash",
       context=r"NCCL (INFO|WARN) (NET|Plugin|IB|Socket)|NET/(IB|Plugin|Socket)|libnccl|nccl-net"),
    # --- loss divergence (tracking's alerts, or the training code saying so)
    _r(r"non_finite|NaN|Inf", ALERT, "loss_nan", 0.88, "lower_lr", "alert-non-finite"),
    _r(r"loss_spike|grad_norm_explosion", ALERT, "loss_nan", 0.6, "lower_lr", "alert-divergence"),
    _r(r"\bloss( is| became|:|=)? ?(nan|inf)\b|nan loss|non-finite loss|FloatingPointError|found NaN|"
       r"loss scale already at minimum|grad_norm:? nan\b", LOG, "loss_nan", 0.84,
       "lower_lr", "log-nan"),
    # --- data loading and storage
    _r(r"DataLoader worker \(pid[^)]*\) (is killed|exited unexpectedly)|Input/output error|Stale file handle|"
       r"No space left on device|botocore\.exceptions|S3 .*(error|failed)|NoSuchKey|"
       r"Read-only file system|Transport endpoint is not connected|Remote end closed connection|"
       r"gcsfs|fsspec.*Error|HfHubHTTPError|datasets\.exceptions|ArrowInvalid|EOFError: Ran out of input|"
       r"corrupted record|UnpicklingError|truncated (file|record)|Connection to storage", LOG, "data_error", 0.8,
       "check_data", "log-data"),
    _r(r"FileNotFoundError: .*(data|dataset|shard|\.parquet|\.arrow|\.jsonl|\.tar|\.bin|\.idx|s3://|gs://)",
       LOG, "data_error", 0.78, "check_data", "log-data-missing"),
    _r(r"FailedMount|MountVolume\.SetUp failed|FailedAttachVolume", K8S_EVENT, "data_error", 0.75, "check_data",
       "event-mount"),
    # --- image and configuration
    _r(r"^(ErrImagePull|ImagePullBackOff|InvalidImageName|ErrImageNeverPull)$", REASON, "image_pull", 0.98,
       "fix_image", "reason-image"),
    _r(r"Failed to pull image|pull access denied|manifest unknown|ErrImagePull|ImagePullBackOff", K8S_EVENT,
       "image_pull", 0.92, "fix_image", "event-image"),
    _r(r"^(CreateContainerConfigError|CreateContainerError|RunContainerError)$", REASON, "invalid_spec", 0.95,
       "fix_spec", "reason-config"),
    _r(r"(secret|configmap) \"?[\w.-]+\"? not found|couldn't find key|FailedCreate|admission webhook .* denied|"
       r"is invalid:", K8S_EVENT, "invalid_spec", 0.88, "fix_spec", "event-config"),
    _r(r"exec: \"?[^\"]+\"?: executable file not found|no such file or directory: .*(python|torchrun|bash)|"
       r"OCI runtime (create|exec) failed", LOG, "invalid_spec", 0.8, "fix_spec", "log-exec"),
    _r(r"126|127", EXIT_CODE, "invalid_spec", 0.45, "fix_spec", "exit-not-executable"),
    # --- nodes
    _r(r"^lost$", OUTCOME, "node_lost", 0.9, "retry_elsewhere", "outcome-lost"),
    _r(r"^(NodeLost|NodeNotReady|DeletionByTaintManager|TerminationByKubelet|DeletionByPodGC|NodeShutdown|"
       r"UnexpectedAdmissionError)$", REASON, "node_lost", 0.9, "retry_elsewhere", "reason-node-lost"),
    _r(r"NotReady|Ready=False|Ready=Unknown|NetworkUnavailable=True|KernelDeadlock", NODE_CONDITION, "node_lost",
       0.86, "retry_elsewhere", "condition-not-ready"),
    _r(r"NodeNotReady|NodeNotSchedulable|Node .* status is now: NodeNotReady|TaintManagerEviction", K8S_EVENT,
       "node_lost", 0.85, "retry_elsewhere", "event-node"),
    _r(r"^(PreemptionByScheduler|EvictionByEvictionAPI|Preempting|Preempted)$", REASON, "preempted", 0.95,
       "retry_elsewhere", "reason-preempted"),
    _r(r"Preempted|preempted by|Evicted pod|spot instance|instance-terminat", K8S_EVENT, "preempted", 0.8,
       "retry_elsewhere", "event-preempted"),
    # --- hangs: the run's own progress stopped
    _r(r"no new step", PROGRESS, "hang", 0.82, "restart_from_checkpoint", "progress-hang"),
    # --- the user's code
    _r(r"Traceback \(most recent call last\)", LOG, "user_error", 0.55, "fix_code", "log-traceback"),
    _r(r"^(\[[\w ]+\]:?\s*)?\s*(\w+\.)*\w*(Error|Exception)(: |$)", LOG, "user_error", 0.56, "fix_code",
       "log-exception"),
    _r(r"Segmentation fault|core dumped|SIGSEGV", LOG, "user_error", 0.45, "fix_code", "log-segfault"),
    _r(r"(?!126\Z|127\Z|137\Z|143\Z)[1-9]\d{0,2}", EXIT_CODE, "user_error", 0.3, "fix_code",
       "exit-nonzero"),
    # --- the backend's first classification, when nothing more specific says otherwise
    _r(r"^(image_pull|invalid_spec|node_lost|preempted|cuda_oom|host_oom|nccl|nccl_timeout|user_error|hang|"
       r"loss_nan|data_error)$", CAUSE, "", 0.4, "", "cause-backend"),
)

_CORROBORATION = 0.01  # per extra matching item, up to _MAX_BONUS
_MAX_BONUS = 0.03
_MAX_ITEMS = 12
_LOG_TAIL = 400  # lines per replica scanned


class InvalidRule(ValueError):
    """A rule that cannot be used; `field` names what is wrong."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def validate(rule: Rule) -> Rule:
    """`rule` if it can be used, else InvalidRule naming the field (for the admin's patterns)."""
    if rule.source not in SOURCES:
        raise InvalidRule(f"{rule.source!r} is not a source; one of {', '.join(SOURCES)}.", "source")
    if rule.cause not in CAUSES_BY_NAME:
        raise InvalidRule(f"{rule.cause!r} is not a cause class; one of {', '.join(CAUSES_BY_NAME)}.", "cause")
    if not 0.0 < rule.confidence <= 1.0:
        raise InvalidRule("A confidence is more than 0 and at most 1.", "confidence")
    if rule.action and rule.action not in ACTIONS:
        raise InvalidRule(f"{rule.action!r} is not an action; one of {', '.join(ACTIONS)}.", "action")
    if rule.quarantine not in ("", QUARANTINE_NOW, QUARANTINE_COUNT):
        raise InvalidRule(f"Quarantine is '', {QUARANTINE_NOW!r} or {QUARANTINE_COUNT!r}.", "quarantine")
    if not rule.pattern.strip():
        raise InvalidRule("A pattern may not be blank.", "pattern")
    if rule.context and rule.source != LOG:
        raise InvalidRule("Only a log rule has a context (the lines before its match).", "context")
    try:
        re.compile(rule.context)
    except re.error as exc:
        raise InvalidRule(f"Not a valid regular expression: {exc}.", "context") from None
    try:
        compiled = re.compile(rule.pattern, re.I)
    except re.error as exc:
        raise InvalidRule(f"Not a valid regular expression: {exc}.", "pattern") from None
    if compiled.search(""):
        raise InvalidRule("The pattern matches an empty text, so it would match everything.", "pattern")
    return rule


class Compiled:
    """Rules with their patterns compiled once, grouped by source."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = tuple(rules)
        self.by_source: dict[str, list[tuple[int, Rule, re.Pattern[str], re.Pattern[str] | None]]] = {
            s: [] for s in SOURCES}
        for order, rule in enumerate(self.rules):
            pattern = rf"(?:{rule.pattern})\Z" if rule.source in WHOLE_VALUE else rule.pattern
            context = re.compile(rule.context, re.I) if rule.context else None
            self.by_source[rule.source].append((order, rule, re.compile(pattern, re.I), context))


_builtin = Compiled(BUILTIN)


def ruleset(extra: Iterable[Rule] = ()) -> Compiled:
    """The built-in rules with `extra` (an admin's patterns) before them: an added pattern wins a tie."""
    extra = tuple(extra)
    return Compiled((*extra, *BUILTIN)) if extra else _builtin


def _items(evidence: Evidence) -> Iterable[tuple[str, str, Item, Sequence[str]]]:
    """(source, text matched against, the item, the log lines before it) of every piece of evidence."""
    for replica, lines in evidence.logs.items():
        first = evidence.first_line.get(replica, 1)
        start = max(0, len(lines) - _LOG_TAIL)
        for offset, line in enumerate(lines[start:], start=start):
            text = str(line)[:2000]
            before = lines[max(0, offset - CONTEXT_LINES):offset]
            yield LOG, text, Item(LOG, text.strip(), replica=replica, line=first + offset), before
    for reason in evidence.reasons:
        yield REASON, reason, Item(REASON, reason), ()
    if evidence.exit_code is not None:
        yield EXIT_CODE, str(evidence.exit_code), Item(EXIT_CODE, str(evidence.exit_code)), ()
    for xid in evidence.xids:
        where = f" on {xid.node}" if xid.node else ""
        gpu = f" GPU {xid.gpu}" if xid.gpu else ""
        when = f", {xid.seconds_before_end:.0f} s before the attempt ended" if xid.seconds_before_end is not None \
            else ""
        text = f"Xid {xid.xid}{where}{gpu}{when}" + (f": {xid.message}" if xid.message else "")
        yield XID, str(xid.xid), Item(XID, text, node=xid.node), ()
    for source, values in ((NODE_CONDITION, evidence.node_conditions), (K8S_EVENT, evidence.k8s_events),
                           (ALERT, evidence.alerts), (PROGRESS, evidence.progress)):
        for value in values:
            yield source, value, Item(source, value, node=_node_of(value) if source == NODE_CONDITION else ""), ()
    if evidence.outcome:
        yield OUTCOME, evidence.outcome, Item(OUTCOME, evidence.outcome), ()
    if evidence.cause:
        yield CAUSE, evidence.cause, Item(CAUSE, evidence.cause), ()


def _node_of(condition: str) -> str:
    """'gpu-17: Ready=False' -> 'gpu-17'."""
    return condition.split(":", 1)[0].strip() if ":" in condition else ""


def diagnose(evidence: Evidence, rules: Compiled | None = None) -> Diagnosis:
    """The most likely cause of a failed attempt, with its evidence and recommended action."""
    rules = rules or _builtin
    votes: dict[str, list[tuple[float, int, Rule, Item]]] = {}
    for source, text, item, before in _items(evidence):
        for order, rule, pattern, context in rules.by_source[source]:
            if (pattern.match(text) if source in WHOLE_VALUE else pattern.search(text)) is None:
                continue
            if context is not None and not any(context.search(str(line)) for line in before):
                continue
            cause = rule.cause or (evidence.cause if source == CAUSE else "")
            if cause not in CAUSES_BY_NAME:
                continue
            votes.setdefault(cause, []).append((rule.confidence, order, rule, Item(
                item.source, item.text, item.replica, item.line, item.node, rule.name or rule.pattern[:40])))
    if not votes:
        return _unmatched(evidence)

    def score(cause: str) -> tuple[float, int]:
        matches = votes[cause]
        best = max(m[0] for m in matches)
        first = min(m[1] for m in matches if m[0] == best)
        bonus = min(_MAX_BONUS, _CORROBORATION * (len({(m[3].source, m[3].text) for m in matches}) - 1))
        return min(0.99 if best < 1.0 else 1.0, best + bonus), -first

    winner = max(votes, key=score)
    confidence = score(winner)[0]
    matches = sorted(votes[winner], key=lambda m: (-m[0], m[1]))
    strongest = matches[0][2]
    action = strongest.action or _default_action(winner)
    quarantine = max((m[2].quarantine for m in matches), key=("", QUARANTINE_COUNT, QUARANTINE_NOW).index)
    symptoms = sorted((m for cause, found in votes.items() if cause != winner for m in found if m[0] >= 0.7),
                      key=lambda m: (-m[0], m[1]))
    items = _evidence_items(matches, symptoms[:3], evidence)
    nodes = tuple(dict.fromkeys(m[3].node for m in matches if m[3].node))
    return Diagnosis(winner, round(confidence, 3), items, action, _summary(winner, items), quarantine, nodes)


def _evidence_items(matches: list[tuple[float, int, Rule, Item]], symptoms: list[tuple[float, int, Rule, Item]],
                    evidence: Evidence) -> tuple[Item, ...]:
    """The winning class's matches (one per distinct text, strongest first, then in log order), the strongest
    matches of other classes (symptoms: the NCCL timeout an Xid caused), and the reason and exit code as context
    when they did not match."""
    seen: set[tuple[str, str]] = set()
    chosen: list[Item] = []
    for _, _, _, item in [*matches[:_MAX_ITEMS - 5], *symptoms]:
        key = (item.source, item.text)
        if key not in seen:
            seen.add(key)
            chosen.append(item)
    context = [Item(REASON, reason) for reason in evidence.reasons[:1]]
    if evidence.exit_code is not None:
        context.append(Item(EXIT_CODE, str(evidence.exit_code)))
    chosen.extend(item for item in context if (item.source, item.text) not in seen)
    return tuple(chosen)


def _summary(cause: str, items: Sequence[Item]) -> str:
    label = CAUSES_BY_NAME[cause].label
    first = next((item for item in items if item.rule), None)
    if first is None:
        return label
    where = ""
    if first.source == LOG and first.line is not None:
        where = f" ({first.replica} line {first.line})" if first.replica else f" (line {first.line})"
    return f"{label}: {first.text[:300]}{where}"


def _default_action(cause: str) -> str:
    for rule in BUILTIN:
        if rule.cause == cause and rule.action:
            return rule.action
    return "investigate"


def _unmatched(evidence: Evidence) -> Diagnosis:
    cause = evidence.cause if evidence.cause in CAUSES_BY_NAME else "unknown"
    context = []
    if evidence.reasons:
        context.append(Item(REASON, evidence.reasons[0]))
    if evidence.exit_code is not None:
        context.append(Item(EXIT_CODE, str(evidence.exit_code)))
    return Diagnosis(cause, 0.2, tuple(context), "investigate", f"{CAUSES_BY_NAME[cause].label}: no known pattern "
                     "matched")
