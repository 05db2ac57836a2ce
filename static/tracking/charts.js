// Metric charts of the run and compare pages: uPlot (loaded as a global by tracking/_assets.html) over the series API.
// Every chart of a page shares one view state (smoothing, log scale, x axis, zoomed step range), so zooming one chart
// zooms them all and the curves stay comparable.

const uPlot = window.uPlot;

export const COLORS = ["#1565c0", "#c62828", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#558b2f",
  "#4e342e", "#283593", "#f9a825", "#37474f"];
const CHART_HEIGHT = 220;
const MARKER_COLORS = { admitted: "#2e7d32", preempted: "#ef6c00", retried: "#c62828", resumed: "#1565c0",
  attempt: "#6b7585" };

export function config() {
  return JSON.parse(document.getElementById("chart-config").textContent);
}

// TensorBoard's smoothing: an exponential moving average, debiased so the start is not pulled toward zero.
export function ema(values, weight) {
  if (!weight) return values;
  let last = 0;
  let count = 0;
  return values.map((v) => {
    if (v == null) return null;
    last = last * weight + (1 - weight) * v;
    count += 1;
    return last / (1 - weight ** count);
  });
}

function fmtDuration(seconds) {
  const s = Math.round(seconds);
  if (Math.abs(s) < 60) return `${s}s`;
  if (Math.abs(s) < 3600) return `${Math.floor(s / 60)}m${String(Math.abs(s % 60)).padStart(2, "0")}`;
  return `${Math.floor(s / 3600)}h${String(Math.floor(Math.abs(s % 3600) / 60)).padStart(2, "0")}`;
}

// The last index whose value is <= x in a sorted array, or -1.
function floorIndex(sorted, x) {
  let lo = 0;
  let hi = sorted.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid] <= x) { found = mid; lo = mid + 1; } else { hi = mid - 1; }
  }
  return found;
}

// One run's series of one key, as fetched: steps and values of finite points, NaN/Inf markers, step -> wall time.
class RunSeries {
  constructor(run) {
    this.run = run;
    this.steps = [];
    this.values = [];
    this.markers = [];
    this.attempts = [];
    this.times = new Map();
  }

  get lastStep() {
    const candidates = [this.steps.at(-1), this.markers.at(-1)?.[0]].filter((s) => s != null);
    return candidates.length ? Math.max(...candidates) : null;
  }

  add(body, replace) {
    if (replace) {
      this.steps = [];
      this.values = [];
      this.markers = [];
      this.times = new Map();
    }
    for (const [step, value] of body.points) { this.steps.push(step); this.values.push(value); }
    this.markers.push(...body.markers);
    for (const [step, ts] of body.times || []) this.times.set(step, ts);
    this.attempts = body.attempts;
  }

  // x of a step on the chosen axis: the step, or its wall time / time since the run started, in seconds.
  x(step, mode) {
    if (mode === "step") return step;
    const ts = this.times.get(step);
    if (ts == null) return null;
    return mode === "wall" ? ts / 1000 : (ts - this.run.started) / 1000;
  }

  // x of a moment (ms) on the chosen axis; by step, the last step logged by then (clamped to the logged range).
  xOfTime(ms, mode) {
    if (mode === "wall") return ms / 1000;
    if (mode === "relative") return (ms - this.run.started) / 1000;
    const pairs = [...this.times.entries()].sort((a, b) => a[1] - b[1]);
    if (!pairs.length) return null;
    const i = floorIndex(pairs.map((p) => p[1]), ms);
    return pairs[Math.max(0, i)][0];
  }

  // The step at an x of the chosen axis (for zooming by time into a step range).
  stepAt(x, mode, roundUp) {
    if (mode === "step") return roundUp ? Math.ceil(x) : Math.floor(x);
    const pairs = [...this.times.entries()].map(([s]) => [this.x(s, mode), s]).sort((a, b) => a[0] - b[0]);
    if (!pairs.length) return null;
    const i = floorIndex(pairs.map((p) => p[0]), x);
    if (roundUp) return pairs[Math.min(pairs.length - 1, i + 1)][1];
    return pairs[Math.max(0, i)][1];
  }
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

  data() {
    const { mode, smoothing, log } = this.view;
    const tables = this.series.map((s) => {
      const pairs = [];
      s.steps.forEach((step, i) => {
        const x = s.x(step, mode);
        if (x != null) pairs.push([x, s.values[i]]);
      });
      pairs.sort((a, b) => a[0] - b[0]);
      // A log scale cannot place zero or below: those points leave a gap rather than a wrong value.
      const ys = ema(pairs.map((p) => p[1]), smoothing).map((v) => (log && v != null && v <= 0 ? null : v));
      return [pairs.map((p) => p[0]), ys];
    });
    return tables.length === 1 ? tables[0] : uPlot.join(tables);
  }

  options() {
    const { mode, log } = this.view;
    const single = this.series.length === 1;
    const xAxis = mode === "relative" ? { values: (u, splits) => splits.map(fmtDuration) } : {};
    return {
      ...this.size(),
      scales: { x: { time: mode === "wall" }, y: log ? { distr: 3, log: 10 } : {} },
      series: [
        { label: mode === "step" ? "step" : "time", value: mode === "relative" ? (u, v) => (v == null ? "—" : fmtDuration(v)) : undefined },
        ...this.series.map((s, i) => ({
          label: single ? this.key : s.run.name, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
          points: { show: false },
        })),
      ],
      axes: [xAxis, { size: 60 }],
      legend: { show: true },
      cursor: { drag: { x: true, y: false, setScale: false } },
      hooks: { setSelect: [(u) => this.onSelect(u)], draw: [(u) => this.drawOverlays(u)] },
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

  // NaN/Inf markers as ticks at the plot's edges, attempt boundaries and job events as dashed vertical lines.
  drawOverlays(u) {
    const { ctx, bbox } = u;
    const mode = this.view.mode;
    const dpr = window.devicePixelRatio || 1;
    const inView = (x) => x != null && x >= u.scales.x.min && x <= u.scales.x.max;
    ctx.save();
    ctx.font = `${10 * dpr}px system-ui, sans-serif`;
    const vertical = (x, color, label) => {
      if (!inView(x)) return;
      const px = u.valToPos(x, "x", true);
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      ctx.setLineDash([4 * dpr, 3 * dpr]);
      ctx.beginPath();
      ctx.moveTo(px, bbox.top);
      ctx.lineTo(px, bbox.top + bbox.height);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillText(label, px + 3 * dpr, bbox.top + 10 * dpr);
    };
    this.series.forEach((s) => {
      for (const a of s.attempts) {
        if (a.attempt > 1) vertical(mode === "step" ? a.step : s.xOfTime(a.timestamp, mode), MARKER_COLORS.attempt, `attempt ${a.attempt}`);
      }
    });
    const first = this.series[0];
    for (const m of this.view.cfg.markers) vertical(first.xOfTime(m.time, mode), MARKER_COLORS[m.kind], m.kind);
    this.series.forEach((s, i) => {
      ctx.fillStyle = COLORS[i % COLORS.length];
      for (const [step, kind] of s.markers) {
        const x = s.x(step, mode);
        if (!inView(x)) continue;
        const px = u.valToPos(x, "x", true);
        const top = kind === "Infinity";
        const y = top ? bbox.top + 2 * dpr : bbox.top + bbox.height - 2 * dpr;
        ctx.beginPath(); // a triangle pointing off the chart: the value is beyond it (or not a number at all)
        ctx.moveTo(px - 4 * dpr, top ? y + 7 * dpr : y - 7 * dpr);
        ctx.lineTo(px + 4 * dpr, top ? y + 7 * dpr : y - 7 * dpr);
        ctx.lineTo(px, y);
        ctx.closePath();
        ctx.fill();
        if (kind === "NaN") ctx.fillText("NaN", px + 5 * dpr, y - 2 * dpr);
      }
    });
    ctx.restore();
  }
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
