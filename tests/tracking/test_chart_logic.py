"""The metric charts' logic in JavaScript (static/tracking/chartdata.js: the x range, NaN gaps, tick labels, axis
width, label rows, isolated points, the raw line under a smoothed one; and charts.js's uPlot options and overlays
against stand-ins for the browser and uPlot), checked by Node's built-in test runner over tests/js/. No npm package
is needed; where node is missing the test is skipped, and tests/browser draws the charts in Chromium."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="the chart logic's tests need node (apt-get install nodejs)")
def test_the_chart_logic_passes_its_node_tests():
    done = subprocess.run([NODE, "--test", "tests/js/"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout and "# pass 0" not in done.stdout
