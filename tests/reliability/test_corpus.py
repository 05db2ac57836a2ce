"""The built-in rules on the labelled corpus (tests/data/failures/, scripts/gen_failure_corpus.py): at least 90%
right overall and no class under 80% (the issue's goal; bench/bench_diagnosis.py prints the table). Not timed."""

from __future__ import annotations

from collections import defaultdict

from jobs import failures
from reliability import corpus, rules


def test_the_corpus_has_at_least_200_failed_attempts_of_every_class():
    cases = list(corpus.cases())
    assert len(cases) >= 200
    assert {case.label for case in cases} >= set(failures.CAUSES) - {"unknown", "unschedulable", "pending_timeout"}
    assert len({case.id for case in cases}) == len(cases)


def test_the_rules_meet_the_accuracy_goal_on_the_corpus():
    right: dict[str, list[bool]] = defaultdict(list)
    for case in corpus.cases():
        right[case.label].append(rules.diagnose(case.evidence).cause == case.label)
    overall = sum(sum(hits) for hits in right.values()) / sum(len(hits) for hits in right.values())
    per_class = {label: sum(hits) / len(hits) for label, hits in right.items()}
    assert overall >= 0.90, per_class
    assert min(per_class.values()) >= 0.80, per_class


def test_a_context_rule_needs_its_context_in_the_lines_before():
    plugin = ["NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin (v7)", "Segmentation fault (core dumped)"]
    assert rules.diagnose(rules.Evidence(logs={"w": plugin}, exit_code=139)).cause == "nccl"
    alone = ["step 10 loss 2.0", "Segmentation fault (core dumped)"]
    assert rules.diagnose(rules.Evidence(logs={"w": alone}, exit_code=139)).cause == "user_error"
    far = [plugin[0], *(f"step {i}" for i in range(rules.CONTEXT_LINES)), plugin[1]]
    assert rules.diagnose(rules.Evidence(logs={"w": far}, exit_code=139)).cause == "user_error"
