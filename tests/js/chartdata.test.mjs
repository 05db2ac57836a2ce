// The metric charts' data and layout (static/tracking/chartdata.js), under Node's test runner: run by
// tests/tracking/test_chart_logic.py (skipped where there is no node), or `node --test tests/js/`.
import assert from "node:assert/strict";
import test from "node:test";

import {
  RunSeries, axisSize, ema, isolatedPoints, labelRows, runTable, tickLabels, xRange,
} from "../../static/tracking/chartdata.js";

function series(points, markers = [], attempts = []) {
  const s = new RunSeries({ started: 0 });
  s.add({ points, markers, attempts, times: [...points, ...markers].map(([step]) => [step, step * 1000]) }, true);
  return s;
}

// The seeded NaN run: finite to step 290, NaN from step 300 on.
const diverged = series([[280, 2.1], [290, 2.4]], [[300, "NaN"], [310, "NaN"], [320, "NaN"]]);

test("the table holds every logged step, a NaN as a gap (null), so the x axis reaches the NaN stretch", () => {
  const [xs, ys] = runTable(diverged, "step", 0, false);
  assert.deepEqual(xs, [280, 290, 300, 310, 320]);
  assert.deepEqual(ys, [2.1, 2.4, null, null, null]);
  assert.deepEqual(xRange(Math.min(...xs), Math.max(...xs), []), [280, 320]);
  const [times] = runTable(diverged, "relative", 0, false);
  assert.deepEqual(times, [280, 290, 300, 310, 320]); // seconds since the start: the steps' times here
});

test("the x range covers the attempt and job markers beyond the data", () => {
  assert.deepEqual(xRange(280, 320, [150, 400, null]), [150, 400]);
  assert.deepEqual(xRange(5, 5, []), [4, 6]); // one point: a range it can be drawn in
  assert.deepEqual(xRange(null, null, []), [null, null]);
});

test("a NaN between finite values leaves a gap the line does not span", () => {
  const [, ys] = runTable(series([[1, 1.0], [3, 3.0]], [[2, "NaN"]]), "step", 0, false);
  assert.deepEqual(ys, [1.0, null, 3.0]);
});

test("smoothing keeps the raw values beside the smoothed ones, and a NaN stays a gap in both", () => {
  const table = runTable(series([[0, 1.0], [1, 3.0], [3, 5.0]], [[2, "NaN"]]), "step", 0.5, false);
  assert.equal(table.length, 3);
  assert.deepEqual(table[1], [1.0, 3.0, null, 5.0]);
  assert.equal(table[2][0], 1.0);
  assert.equal(table[2][2], null);
  assert.ok(table[2][1] > 1.0 && table[2][1] < 3.0);
  assert.deepEqual(ema([1, null, 1], 0.9), [1, null, 1]);
});

test("on a log scale zero and below are gaps", () => {
  assert.deepEqual(runTable(series([[0, 0], [1, 10]]), "step", 0, true)[1], [null, 10]);
});

test("small values get labels that differ: 0, 1e-4, 2e-4, 3e-4 rather than 0, 0, 0, 0", () => {
  assert.deepEqual(tickLabels([0, 0.0001, 0.0002, 0.0003]), ["0", "1e-4", "2e-4", "3e-4"]);
  assert.deepEqual(tickLabels([0.00005, 0.0001, 0.00015]), ["5.0e-5", "1.0e-4", "1.5e-4"]);
  assert.deepEqual(tickLabels([0.5, 1, 1.5, 2]), ["0.5", "1.0", "1.5", "2.0"]);
  assert.deepEqual(tickLabels([0, 0.25, 0.5, 0.75]), ["0", "0.25", "0.50", "0.75"]); // not 0.3 for 0.25
  assert.deepEqual(tickLabels([0, 20000, 40000]), ["0", "20000", "40000"]);
  assert.deepEqual(tickLabels([0, 2e6, 4e6]), ["0", "2e6", "4e6"]);
  assert.deepEqual(tickLabels([-0.1, 2.7755575615628914e-17, 0.1]), ["-0.1", "0", "0.1"]);
  assert.deepEqual(tickLabels([1, null, 100]), ["1", "", "100"]); // a log axis leaves some unlabelled
});

test("the y axis is as wide as its longest label", () => {
  const measure = (text) => text.length * 7;
  const narrow = axisSize(["0", "1"], measure);
  const wide = axisSize(["1234567", "2"], measure);
  assert.ok(wide >= 7 * 7 + 15, `${wide}`);
  assert.ok(narrow < wide);
  assert.equal(axisSize(null, measure), narrow); // before the labels are known
});

test("marker labels go in rows where they do not overlap", () => {
  const rows = labelRows([{ x: 0, width: 60 }, { x: 10, width: 60 }, { x: 30, width: 60 }, { x: 200, width: 60 }], 3);
  assert.deepEqual(rows, [0, 1, 2, 0]);
  assert.deepEqual(labelRows([{ x: 0, width: 60 }, { x: 10, width: 60 }], 1), [0, -1]); // no room: unlabelled
});

test("a one-point series and a point between NaN gaps are drawn as points", () => {
  assert.deepEqual(isolatedPoints([2.5]), [0]);
  assert.deepEqual(isolatedPoints([1, 2, null, 3, null, 4, 5]), [3]);
  assert.equal(isolatedPoints([1, 2, 3]), null);
  // joined runs: undefined marks another run's x, which the line spans
  assert.equal(isolatedPoints([1, undefined, 2]), null);
  assert.deepEqual(isolatedPoints([undefined, 7, undefined]), [1]);
});
