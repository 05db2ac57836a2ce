// Metric charts of the run and compare pages: uPlot (loaded as a global by tracking/_assets.html) over the series API.
// Every chart of a page shares one view state (smoothing, log scale, x axis, zoomed step range), so zooming one chart
// zooms them all and the curves stay comparable.

import { RunSeries, axisSize, fmtDuration, isolatedPoints, labelRows, runTable, tickLabels, xRange } from "./chartdata.js";

const uPlot = window.uPlot;

export const COLORS = ["#1565c0", "#c62828", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#558b2f",
  "#4e342e", "#283593", "#f9a825", "#37474f"];
const CHART_HEIGHT = 220;
const MARKER_COLORS = { admitted: "#2e7d32", preempted: "#ef6c00", retried: "#c62828", resumed: "#1565c0",
  attempt: "#6b7585", grew: "#00838f", shrank: "#6a1b9a" };
const RAW_ALPHA = 0.25; // the raw line beneath a smoothed one
const LABEL_LINE = 12; // CSS pixels between rows of marker labels

export function config() {
  return JSON.parse(document.getElementById("chart-config").textContent);
}

export class View {
  constructor(cfg) {
    this.cfg = cfg;
    this.smoothing = 0;
    this.log = false;
    this.mode = "step";
    this.range = null; // {min, max} steps when zoomed
    this.charts = [];
  }

  async loadAll() {
    await Promise.all(this.charts.map((c) => c.load()));
  }

  renderAll() {
    for (const chart of this.charts) chart.render();
  }

  async zoom(range) {
    this.range = range;
    document.getElementById("reset-zoom").hidden = range == null;
    await this.loadAll();
  }

  // Wires the controls of _chart_controls.html.
  bindControls() {
    const smoothing = document.getElementById("smoothing");
    smoothing.addEventListener("input", () => {
      this.smoothing = Number(smoothing.value);
      document.getElementById("smoothing-value").textContent = smoothing.value;
      this.renderAll();
    });
    document.getElementById("log-scale").addEventListener("change", (e) => { this.log = e.target.checked; this.renderAll(); });
    document.getElementById("x-axis").addEventListener("change", (e) => { this.mode = e.target.value; this.renderAll(); });
    document.getElementById("reset-zoom").addEventListener("click", () => this.zoom(null));
  }
}

export class MetricChart {
  constructor(view, figure) {
    this.view = view;
    this.figure = figure;
    this.key = figure.dataset.key;
    this.plotEl = figure.querySelector(".plot");
    this.note = figure.querySelector(".chart-note");
    this.series = view.cfg.runs.map((run) => new RunSeries(run));
    this.plot = null;
    figure.chart = this; // the browser tests read the uPlot instance through it
    new ResizeObserver(() => this.plot?.setSize(this.size())).observe(this.plotEl);
  }

  size() {
    return { width: Math.max(200, this.plotEl.clientWidth), height: CHART_HEIGHT };
  }

  url(run, extra) {
    const query = new URLSearchParams({ key: this.key, max_points: String(this.size().width), times: "1", ...extra });
    return `${run.series}?${query}`;
  }

  async fetchSeries(run, extra) {
    const response = await fetch(this.url(run, extra), { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(`${this.key}: HTTP ${response.status}`);
    return response.json();
  }

  // Fetches every run's series over the view's step range (all of it when not zoomed), at about one point per pixel.
  async load() {
    const range = this.view.range;
    const extra = range ? { min_step: String(range.min), max_step: String(range.max) } : {};
    try {
      const bodies = await Promise.all(this.series.map((s) => (s.run.series ? this.fetchSeries(s.run, extra) : null)));
      bodies.forEach((body, i) => body && this.series[i].add(body, true));
      const total = bodies.reduce((n, b) => n + (b ? b.total : 0), 0);
      const shown = this.series.reduce((n, s) => n + s.steps.length + s.markers.length, 0);
      this.note.textContent = total > shown ? `${shown} of ${total} points (extremes kept); zoom for all of them` : "";
    } catch (error) {
      this.note.textContent = `Could not load: ${error.message}`;
    }
    this.render();
  }

  // Live mode: the steps logged since the last one shown, appended.
  async append() {
    await Promise.all(this.series.map(async (s) => {
      const last = s.lastStep;
      const body = await this.fetchSeries(s.run, last == null ? {} : { min_step: String(last + 1) });
      s.add(body, last == null);
    }));
    this.render();
  }

  // One table per run (its x values, its raw values, and with smoothing the smoothed ones), joined on x.
  data() {
    const { mode, smoothing, log } = this.view;
    const tables = this.series.map((s) => runTable(s, mode, smoothing, log));
    const joined = tables.length === 1 ? tables[0] : uPlot.join(tables);
    this.isolated = joined.map((ys, i) => (i ? isolatedPoints(ys) : null));
    return joined;
  }

  // Where the job's events (resizes too) and the attempts' starts are drawn, on the chosen axis: [{x, color, label}].
  verticalMarkers() {
    const mode = this.view.mode;
    const marks = [];
    this.series.forEach((s) => {
      for (const a of s.attempts) {
        if (a.attempt > 1) {
          marks.push({ x: mode === "step" ? a.step : s.xOfTime(a.timestamp, mode), color: MARKER_COLORS.attempt,
            label: `attempt ${a.attempt}` });
        }
      }
    });
    const first = this.series[0];
    for (const m of this.view.cfg.markers) {
      // A resize names its old and new world size ("shrank 6→4"); the other events their kind.
      marks.push({ x: first.xOfTime(m.time, mode), color: MARKER_COLORS[m.kind], label: m.label ?? m.kind });
    }
    return marks.filter((m) => m.x != null).sort((a, b) => a.x - b.x);
  }

  lineSeries() {
    const single = this.series.length === 1;
    const smoothed = this.view.smoothing > 0;
    return this.series.flatMap((s, i) => {
      const stroke = COLORS[i % COLORS.length];
      const label = single ? this.key : s.run.name;
      const line = (extra) => ({ stroke, width: 1.5, spanGaps: false, points: { show: false,
        filter: (u, seriesIdx) => this.isolated?.[seriesIdx] ?? null }, ...extra });
      // Smoothing keeps the raw line, faint, beneath the smoothed one: a spike stays visible.
      return smoothed ? [line({ label: `${label} (raw)`, alpha: RAW_ALPHA, width: 1 }), line({ label })]
        : [line({ label })];
    });
  }

  options() {
    const { mode, log } = this.view;
    const xAxis = mode === "relative" ? { values: (u, splits) => splits.map(fmtDuration) } : {};
    const yAxis = {
      values: (u, splits) => (this.yLabels = tickLabels(splits)), // kept for the browser tests
      size: (u, values, axisIdx) => axisSize(values, (text) => measureAxis(u, axisIdx, text)),
    };
    const markers = this.verticalMarkers();
    // Unzoomed, the x axis covers every marker too; zoomed, the step range chosen.
    const extra = this.view.range == null ? markers.map((m) => m.x) : [];
    return {
      ...this.size(),
      scales: {
        x: { time: mode === "wall", range: (u, min, max) => xRange(min, max, extra) },
        y: log ? { distr: 3, log: 10 } : {},
      },
      series: [
        { label: mode === "step" ? "step" : "time", value: mode === "relative" ? (u, v) => (v == null ? "—" : fmtDuration(v)) : undefined },
        ...this.lineSeries(),
      ],
      axes: [xAxis, yAxis],
      legend: { show: true },
      cursor: { drag: { x: true, y: false, setScale: false } },
      hooks: { setSelect: [(u) => this.onSelect(u)], draw: [(u) => this.drawOverlays(u, markers)] },
    };
  }

  render() {
    this.plot?.destroy();
    this.plot = new uPlot(this.options(), this.data(), this.plotEl);
  }

  // A drag selects x; the chosen range becomes a step range and every chart refetches it at full resolution.
  onSelect(u) {
    if (u.select.width < 3) return;
    const lo = u.posToVal(u.select.left, "x");
    const hi = u.posToVal(u.select.left + u.select.width, "x");
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    const mins = this.series.map((s) => s.stepAt(lo, this.view.mode, false)).filter((v) => v != null);
    const maxs = this.series.map((s) => s.stepAt(hi, this.view.mode, true)).filter((v) => v != null);
    if (!mins.length || !maxs.length) return;
    const range = { min: Math.min(...mins), max: Math.max(...maxs) };
    if (range.max > range.min) this.view.zoom(range);
  }

  // Attempt boundaries and job events as dashed vertical lines, their labels in rows so that none overlaps;
  // NaN/Inf as triangles at the plot's edges, "NaN" written where there is room.
  drawOverlays(u, markers) {
    const { ctx, bbox } = u;
    const mode = this.view.mode;
    const dpr = window.devicePixelRatio || 1;
    const inView = (x) => x != null && x >= u.scales.x.min && x <= u.scales.x.max;
    ctx.save();
    ctx.font = `${10 * dpr}px system-ui, sans-serif`;
    const shown = markers.filter((m) => inView(m.x)).map((m) => ({ ...m, px: u.valToPos(m.x, "x", true) }));
    const rows = labelRows(shown.map((m) => ({ x: m.px + 3 * dpr, width: ctx.measureText(m.label).width })),
      Math.max(1, Math.floor(bbox.height / (LABEL_LINE * dpr)) - 1));
    shown.forEach((m, i) => {
      ctx.strokeStyle = m.color;
      ctx.fillStyle = m.color;
      ctx.setLineDash([4 * dpr, 3 * dpr]);
      ctx.beginPath();
      ctx.moveTo(m.px, bbox.top);
      ctx.lineTo(m.px, bbox.top + bbox.height);
      ctx.stroke();
      ctx.setLineDash([]);
      if (rows[i] >= 0) ctx.fillText(m.label, m.px + 3 * dpr, bbox.top + (10 + rows[i] * LABEL_LINE) * dpr);
    });
    this.series.forEach((s, i) => {
      ctx.fillStyle = COLORS[i % COLORS.length];
      const ticks = s.markers.map(([step, kind]) => ({ x: s.x(step, mode), kind })).filter((t) => inView(t.x))
        .map((t) => ({ ...t, px: u.valToPos(t.x, "x", true) }));
      // One row of "NaN" labels, each where it clears the one before: a NaN stretch is named, not smeared.
      const nans = ticks.filter((t) => t.kind === "NaN");
      const rows = labelRows(nans.map((t) => ({ x: t.px + 5 * dpr, width: ctx.measureText("NaN").width })), 1);
      const named = new Set(nans.filter((t, j) => rows[j] === 0));
      ticks.forEach((t) => {
        const top = t.kind === "Infinity";
        const y = top ? bbox.top + 2 * dpr : bbox.top + bbox.height - 2 * dpr;
        ctx.beginPath(); // a triangle pointing off the chart: the value is beyond it (or not a number at all)
        ctx.moveTo(t.px - 4 * dpr, top ? y + 7 * dpr : y - 7 * dpr);
        ctx.lineTo(t.px + 4 * dpr, top ? y + 7 * dpr : y - 7 * dpr);
        ctx.lineTo(t.px, y);
        ctx.closePath();
        ctx.fill();
        if (named.has(t)) ctx.fillText("NaN", t.px + 5 * dpr, y - 2 * dpr);
      });
    });
    ctx.restore();
  }
}

// The width of an axis label in CSS pixels, in the axis's own font.
export function measureAxis(u, axisIdx, text) {
  const { ctx } = u;
  ctx.save();
  ctx.font = u.axes[axisIdx].font[0];
  const width = ctx.measureText(text).width / uPlot.pxRatio;
  ctx.restore();
  return width;
}

// Builds a chart for every figure of the page and loads them.
export function start(cfg) {
  const view = new View(cfg);
  view.charts = [...document.querySelectorAll("figure.chart")].map((figure) => new MetricChart(view, figure));
  view.bindControls();
  window.tidalCharts = view; // for the browser tests and the console
  view.loadAll();
  return view;
}
