"""The scheduler core compiled to C (scripts/compile_core.py, run by `make install`): it decides what its sources
decide, and it is loaded only when it was compiled from the sources as they are now."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import jobs.scheduling as core
from jobs.scheduling import compiled

ROOT = Path(__file__).resolve().parents[2]

# Cycles of the scheduler benchmark's cluster (1,000 nodes, 100 projects), empty and filled by the scheduler, the
# cycle after, elastic jobs, a pool with services, and a forecast: every result's decisions, waits and positions
# (the seconds per phase left out); a day of the Philly trace replayed under the production policy; and 450 of the
# property tests' random clusters, queues and quotas, drawn the same way on both sides (derandomized): hashed.
DECISIONS = r"""
import hashlib, sys
from dataclasses import replace
sys.path.insert(0, "bench")
import bench_scheduler as b
import jobs.scheduling as core
from jobs.scheduling import Policy, forecast, run_cycle
digest, policy = hashlib.sha256(), Policy()
def note(value):
    digest.update(repr(value).encode())
for fill in (0.0, 0.75):
    snap = b.make_snapshot(1500, fill, seed=3)
    first = run_cycle(snap, policy)
    for result in (first, run_cycle(b.next_minute(snap, first), policy), run_cycle(b.elastic_share(snap), policy),
                   run_cycle(b.with_pool(snap), policy)):
        note(replace(result, seconds={}))
        note(result.stats)
    note(forecast(snap, policy, 20, first=first))
from replay.paths import traces_dir
from replay.engine import run_replay
from replay.policies import get_policy
from replay.scenarios import PHILLY_DAY, philly_scenario
if (traces_dir() / PHILLY_DAY).exists():  # a real trace's day: every job's start, end and attempts
    scn = philly_scenario(scale=0.25, trace_file=PHILLY_DAY)
    replayed = run_replay(scn.trace, scn.cluster, scn.quotas, get_policy("production"))
    note([(j.id, j.first_start, j.end, j.preemptions) for j in replayed.jobs])
from hypothesis import HealthCheck, given, settings
from tests.scheduling.test_properties import elastic_scenarios, pool_scenarios, scenarios
for strategy in (scenarios(), elastic_scenarios(), pool_scenarios()):  # the property tests' random clusters
    @settings(derandomize=True, max_examples=150, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def decide(case):
        snap, policy = case[0], case[1]
        note(snap)
        note(replace(run_cycle(snap, policy), seconds={}))
    decide()
print(core.COMPILED, digest.hexdigest())
"""


def decisions(compiled_core: bool) -> tuple[str, str]:
    env = {**os.environ, "TIDAL_COMPILED_CORE": "1" if compiled_core else "0"}
    out = subprocess.run([sys.executable, "-c", DECISIONS], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600, check=True).stdout.split()
    return out[0], out[1]


@pytest.mark.skipif(compiled.compiled_dir() is None, reason="the core is not compiled here (no C compiler?)")
def test_the_compiled_core_decides_what_its_sources_decide():
    loaded, fast = decisions(compiled_core=True)
    source, plain = decisions(compiled_core=False)
    assert (loaded, source) == ("True", "False")  # each side ran what it was meant to
    assert fast == plain


@pytest.mark.skipif(compiled.compiled_dir() is None, reason="the core is not compiled here (no C compiler?)")
def test_a_built_core_is_the_one_in_use():
    assert core.COMPILED
    assert Path(core.cycle.__file__).suffix == ".so"
    assert Path(core.cycle.__file__).is_relative_to(compiled.COMPILED_PACKAGE_DIR)
    assert Path(sys.modules["jobs.scheduling.fast.preemption"].__file__).is_relative_to(compiled.COMPILED_PACKAGE_DIR)


@pytest.mark.skipif(compiled.compiled_dir() is None, reason="the core is not compiled here (no C compiler?)")
def test_the_plain_data_compiled_still_pickles_copies_and_keeps_its_numbers():
    """What callers build and read (model.py) is compiled with the core, and still behaves as plain data: it
    pickles and copies (model.Record), compares and hashes by value, refuses changes, and keeps the numbers it is
    given (a priority of 500 stays the int 500)."""
    import copy
    import dataclasses
    import pickle

    from jobs.scheduling import Node, PendingJob, ReplicaGroup, RunningJob, Snapshot

    assert Path(core.model.__file__).suffix == ".so"
    snap = Snapshot(0.0, (Node("n1", "gpu", 8, 8),), (), (), (RunningJob(1, "p", 500, 0.0, (), "gpu"),),
                    (PendingJob(2, "p", 1000, 0.0, (ReplicaGroup("w", 1, 4, "gpu"),)),))
    assert pickle.loads(pickle.dumps(snap)) == snap
    assert copy.deepcopy(snap) == snap and copy.copy(snap) == snap
    assert repr(snap.running[0].priority) == "500"
    assert hash(snap.pending[0]) == hash(PendingJob(2, "p", 1000, 0.0, (ReplicaGroup("w", 1, 4, "gpu"),)))
    assert dataclasses.replace(snap.pending[0], priority=7).priority == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.pending[0].priority = 7


def test_a_build_of_other_sources_is_never_loaded(tmp_path, monkeypatch):
    monkeypatch.setattr(compiled, "HASH_FILE", tmp_path / "SOURCES_HASH")
    assert compiled.compiled_dir() is None  # not built
    compiled.HASH_FILE.write_text("0" * 64 + "\n")  # built before a source changed
    assert compiled.compiled_dir() is None
    compiled.HASH_FILE.write_text(compiled.sources_hash() + "\n")
    assert compiled.compiled_dir() == str(compiled.COMPILED_PACKAGE_DIR)
    monkeypatch.setenv("TIDAL_COMPILED_CORE", "0")
    assert compiled.compiled_dir() is None


def test_the_hash_covers_every_compiled_module_and_changes_with_any(tmp_path, monkeypatch):
    names = {str(p.relative_to(compiled.PACKAGE_DIR)) for p in compiled.compiled_sources()}
    assert {"cycle.py", "fast/preemption.py", "fast/memo.py", "state.py", "model.py"} <= names
    assert not names & {"__init__.py", "compiled.py"}
    package = tmp_path / "scheduling"
    (package / "fast").mkdir(parents=True)
    for path in compiled.compiled_sources():
        (package / path.relative_to(compiled.PACKAGE_DIR)).write_bytes(path.read_bytes())
    monkeypatch.setattr(compiled, "PACKAGE_DIR", package)
    before = compiled.sources_hash()
    (package / "fast" / "memo.py").write_text((package / "fast" / "memo.py").read_text() + "\n# edited\n")
    assert compiled.sources_hash() != before
