"""Reference check of issue 5: the Philly week at 704 GPUs reproduces the published baselines within 5 %.

Slow (a few minutes): the three isolated baselines replay the week through the real core, then the pooled
strict FIFO and the production policy. Run alone with `pytest -m slow tests/replay/test_reference.py`.
"""

import pytest

from replay.api import run
from replay.paths import traces_dir
from replay.results import summarize
from replay.scenarios import PHILLY_REFERENCE, PHILLY_WEEK, philly_scenario
from tests.replay.core import needs_core

pytestmark = [
    pytest.mark.slow,
    needs_core,
    pytest.mark.skipif(not (traces_dir() / PHILLY_WEEK).exists(), reason="shared traces not present"),
]


@pytest.fixture(scope="module")
def week():
    return philly_scenario(scale=0.25)


def _overall(week, name):
    r = run(week.trace, week.cluster, week.quotas, name, partition=None)  # baselines on isolated partitions
    return summarize(r)


def test_week_setup(week):
    assert len(week.trace) == 14185
    assert week.cluster.total_devices == 704 and len(week.cluster.nodes) == 88
    assert len({q.project for q in week.quotas.quotas}) == 11


@pytest.mark.parametrize("name", ["strict-fifo", "fifo-skip", "sjf"])
def test_isolated_baselines_within_5_percent(week, name):
    o = _overall(week, name)["overall"]
    ref_wait, ref_jct = PHILLY_REFERENCE[name]
    assert o["finished"] == 14185
    assert o["wait_mean"] == pytest.approx(ref_wait, rel=0.05)
    assert o["jct_mean"] == pytest.approx(ref_jct, rel=0.05)


def test_production_close_to_pooled_and_every_vc_gets_its_guarantee(week):
    ref_wait, ref_jct = PHILLY_REFERENCE["pooled-fifo"]
    s = _overall(week, "production")
    o = s["overall"]
    # "Close to the pooled figure": within the pooled reference's JCT by 5 % and a small absolute wait.
    assert o["jct_mean"] == pytest.approx(ref_jct, rel=0.05)
    assert o["wait_mean"] <= 2 * ref_wait
    # No VC ever waited with a job that fit in its unused guarantee.
    assert o["projects_starved"] == 0
    assert all(p["guarantee_met"] == 1.0 for p in s["projects"].values())
