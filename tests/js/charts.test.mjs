// The chart module itself (static/tracking/charts.js) against stand-ins for the browser and uPlot: the options it
// hands uPlot (x range, axis labels and width, series, isolated points) and its overlay drawing run without error
// and do what the page needs. tests/browser draws the real thing in Chromium.
import assert from "node:assert/strict";
import test from "node:test";

const drawn = [];
const context = {
  font: "", fillStyle: "", strokeStyle: "",
  save() {}, restore() {}, beginPath() {}, moveTo() {}, lineTo() {}, closePath() {}, fill() {}, stroke() {},
  setLineDash() {},
  measureText(text) { return { width: text.length * 6 }; },
  fillText(text, x, y) { drawn.push({ text, x, y }); },
};
class FakePlot {
  static pxRatio = 1;
  constructor(options, data) { this.options = options; this.data = data; }
  destroy() {}
}
globalThis.window = { uPlot: FakePlot, devicePixelRatio: 1 };
globalThis.ResizeObserver = class { observe() {} };

const { MetricChart, View } = await import("../../static/tracking/charts.js");

function chart(markers = []) {
  const cfg = { runs: [{ id: 1, name: "run", started: 0, series: "/s" }], markers };
  const plot = { clientWidth: 600 };
  const figure = { dataset: { key: "train/loss" }, querySelector: (sel) => (sel === ".plot" ? plot : { textContent: "" }) };
  return new MetricChart(new View(cfg), figure);
}

test("the options cover the NaN stretch and the markers, and label small values apart", () => {
  const c = chart([{ kind: "preempted", time: 400_000 }]);
  c.series[0].add({ points: [[0, 3e-4], [100, 2e-4]], markers: [[200, "NaN"], [300, "NaN"]],
    attempts: [{ attempt: 2, step: 350, timestamp: 350_000 }],
    times: [[0, 0], [100, 100_000], [200, 200_000], [300, 300_000]] }, true);
  const data = c.data();
  assert.deepEqual(data[0], [0, 100, 200, 300]);
  assert.deepEqual(data[1], [3e-4, 2e-4, null, null]);
  const options = c.options();
  assert.deepEqual(options.scales.x.range(null, 0, 300), [0, 350]); // the attempt's start at step 350
  assert.deepEqual(options.axes[1].values(null, [0, 1e-4, 2e-4, 3e-4]), ["0", "1e-4", "2e-4", "3e-4"]);
  const u = { ctx: context, axes: [{}, { font: ["12px sans-serif"] }] };
  assert.ok(options.axes[1].size(u, ["0.00025", "1"], 1) >= 7 * 6 + 15);
  assert.equal(options.series[1].spanGaps, false);
});

test("a one-point series is drawn as a point, and smoothing adds the raw line beneath", () => {
  const c = chart();
  c.series[0].add({ points: [[5, 1.5]], markers: [], attempts: [], times: [[5, 5000]] }, true);
  c.data();
  let options = c.options();
  assert.deepEqual(options.series[1].points.filter(null, 1), [0]);
  c.view.smoothing = 0.6;
  c.data();
  options = c.options();
  assert.deepEqual(options.series.slice(1).map((s) => [s.label, s.alpha ?? 1]), [["train/loss (raw)", 0.25],
    ["train/loss", 1]]);
});

test("the overlays put close marker labels on separate rows and name a NaN stretch once", () => {
  const c = chart([{ kind: "admitted", time: 100_000 }, { kind: "preempted", time: 100_100 }]);
  c.view.mode = "wall";
  c.series[0].add({ points: [[0, 1]], markers: [[1, "NaN"], [2, "NaN"], [3, "NaN"]], attempts: [],
    times: [[0, 99_500], [1, 100_500], [2, 100_550], [3, 100_600]] }, true);
  const u = { ctx: context, bbox: { top: 0, left: 0, width: 600, height: 200 }, scales: { x: { min: 99, max: 102 } },
    valToPos: (x) => (x - 99) * 200 };
  drawn.length = 0;
  c.drawOverlays(u, c.verticalMarkers());
  const labels = drawn.filter((d) => d.text === "admitted" || d.text === "preempted");
  assert.deepEqual(labels.map((d) => d.text), ["admitted", "preempted"]);
  assert.notEqual(labels[0].y, labels[1].y); // 20 px apart: the second goes on the next row
  assert.equal(drawn.filter((d) => d.text === "NaN").length, 1); // 10 px apart: one label for the stretch
});
