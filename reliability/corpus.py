"""The labelled corpus of failed attempts (tests/data/failures/, made by scripts/gen_failure_corpus.py) read as the
platform would see each case: the evidence `reliability.evidence` gathers from an attempt row, with the cause the
Kubernetes backend's first classification (`clusters.kube.failures.classify`) would have given from the pod's
reason, exit code and log tail. Pure: the benchmark and the accuracy test use it without a database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusters.kube.failures import classify
from reliability import rules

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "failures"


@dataclass(frozen=True)
class Case:
    id: str
    label: str
    evidence: rules.Evidence


def evidence_of(case: dict[str, Any]) -> rules.Evidence:
    pod = case["pod"]
    logs = {str(k): [str(line) for line in v] for k, v in case["logs"].items()}
    cause = case.get("cause") or ""
    if not cause and case["outcome"] == "failed" and pod.get("phase") == "Failed" or pod.get("reason"):
        first = next(iter(logs.values()), [])
        cause = classify(exit_code=pod.get("exit_code"), reason=pod.get("reason") or "",
                         message=pod.get("message") or "", log_lines=first).cause
    if case["outcome"] == "lost":
        cause = "node_lost"
    xids = [rules.XidEvent(int(x["xid"]), str(x.get("node", "")), str(x.get("gpu", "")), str(x.get("message", "")),
                           x.get("seconds_before_end")) for x in case["xid_events"]]
    return rules.Evidence(
        logs=logs, reasons=tuple(r for r in [pod.get("reason") or ""] if r), exit_code=pod.get("exit_code"),
        xids=tuple(xids), node_conditions=tuple(f"{c['node']}: {c['condition']}" for c in case["node_conditions"]),
        k8s_events=tuple(case["k8s_events"]), alerts=tuple(case["alerts"]), progress=tuple(case["progress"]),
        outcome=case["outcome"], cause=cause)


def cases(directory: Path = CORPUS) -> Iterator[Case]:
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                raw = json.loads(line)
                yield Case(raw["id"], raw["label"], evidence_of(raw))
