// Chart panels' pure logic (static/tracking/chartdata.js): a group's mean and min-max band, runs grouped by a param
// or tag, the panel's CSV; run by tests/tracking/test_chart_logic.py.
import assert from "node:assert/strict";
import test from "node:test";

import { csvCell, groupRuns, groupTable, panelCsv } from "../../static/tracking/chartdata.js";

test("a group's mean, min and max at every x any run has, runs between their points interpolated", () => {
  const a = [[0, 10, 20], [1, 3, 5]];
  const b = [[0, 20], [3, 7]];
  const [xs, mean, min, max] = groupTable([a, b]);
  assert.deepEqual(xs, [0, 10, 20]);
  assert.deepEqual(mean, [2, 4, 6]); // b at 10 is 5 (halfway from 3 to 7)
  assert.deepEqual(min, [1, 3, 5]);
  assert.deepEqual(max, [3, 5, 7]);
});

test("a run counts only inside its range and not across its gaps; no run: null", () => {
  const a = [[0, 1, 2, 3], [1, null, 1, 1]];
  const b = [[2, 3], [5, 7]];
  const [xs, mean, min, max] = groupTable([a, b]);
  assert.deepEqual(xs, [0, 1, 2, 3]);
  assert.deepEqual(mean, [1, null, 3, 4]);
  assert.deepEqual(min, [1, null, 1, 1]);
  assert.deepEqual(max, [1, null, 5, 7]);
});

test("runs group by a param or a tag, those without it last", () => {
  const runs = [{ id: 1, params: { lr: "0.1" }, tags: {} }, { id: 2, params: {}, tags: { team: "cv" } },
    { id: 3, params: { lr: "0.01" }, tags: { team: "cv" } }, { id: 4, params: { lr: "0.1" }, tags: {} }];
  assert.deepEqual(groupRuns(runs, "param.lr").map((g) => [g.value, g.runs.map((r) => r.id)]),
    [["0.01", [3]], ["0.1", [1, 4]], [null, [2]]]);
  assert.deepEqual(groupRuns(runs, "tag.team").map((g) => [g.value, g.runs.length]), [["cv", 2], [null, 2]]);
});

test("the CSV quotes what needs it and defuses formulas, numbers kept", () => {
  assert.equal(csvCell('a,"b"'), '"a,""b"""');
  assert.equal(csvCell("=HYPERLINK(1)"), "'=HYPERLINK(1)");
  assert.equal(csvCell(-2.5), "-2.5");
  assert.equal(csvCell(null), "");
  assert.equal(panelCsv("step", [["run a", "loss", 1, 0.5, 0.4]], true),
    "series,key,step,value,smoothed\r\nrun a,loss,1,0.5,0.4\r\n");
});
