"""Exporter of the platform's own job history."""

from datetime import UTC, datetime, timedelta

from replay.export import JobRecord, export_trace
from replay.trace import read_trace

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _records():
    return [
        JobRecord(T0 + timedelta(seconds=30), T0 + timedelta(seconds=90), T0 + timedelta(seconds=390), 8, "a100",
                  "vision", "high", "alice", replicas=2, job_id="j2"),
        {"submit": T0, "start": T0 + timedelta(seconds=5), "end": T0 + timedelta(seconds=65), "devices": 1,
         "flavor": "a100", "project": "nlp", "priority": "weird", "user": "bob"},
        JobRecord(T0, None, None, 1, "a100", "nlp"),  # cancelled while queued
        JobRecord(100.0, 90.0, 200.0, 1, "a100", "nlp"),  # started before it was submitted
    ]  # fmt: skip


def test_export_rebases_and_keeps_shape(tmp_path):
    path = tmp_path / "t.csv"
    counts = export_trace(_records(), path)
    assert counts == {"exported": 2, "not_run": 1, "bad_times": 1, "priority_defaulted": 1}
    t = read_trace(path)
    first, second = t.jobs
    assert (first.submit, first.duration, first.project, first.priority, first.user) == (0, 60, "nlp", "normal", "bob")
    assert (second.submit, second.duration, second.devices, second.replicas) == (30, 300, 8, 2)
    assert second.job_id == "j2" and second.priority == "high"


def test_export_anonymizes_stably(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    export_trace(_records() + [JobRecord(T0, T0, T0 + timedelta(1), 1, "a100", "vision", user="alice")], a,
                 anonymize=True, salt="s1")  # fmt: skip
    export_trace(_records(), b, anonymize=True, salt="s2")
    ta, tb = read_trace(a), read_trace(b)
    text = a.read_text()
    assert "vision" not in text and "alice" not in text and "j2" not in text
    vision = {j.project for j in ta.jobs if j.devices == 8}
    assert len({j.project for j in ta.jobs}) == 2 and vision <= {j.project for j in ta.jobs if j.devices == 1}
    assert {j.project for j in ta.jobs}.isdisjoint({j.project for j in tb.jobs})  # salt changes names
    assert all(j.project.startswith("p-") for j in ta.jobs)
