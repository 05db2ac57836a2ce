// The pure part of the metric charts: what they draw from the series API's bodies (tables, x range, tick labels,
// where labels go), with no DOM and no uPlot, so Node's test runner checks it (tests/js/, run by
// tests/tracking/test_chart_logic.py). charts.js draws with it.

// TensorBoard's smoothing: an exponential moving average, debiased so the start is not pulled toward zero. A null
// (a NaN, a gap) stays null and does not move the average.
export function ema(values, weight) {
  if (!weight) return values;
  let last = 0;
  let count = 0;
  return values.map((v) => {
    if (v == null) return v;
    last = last * weight + (1 - weight) * v;
    count += 1;
    return last / (1 - weight ** count);
  });
}

// The last index whose value is <= x in a sorted array, or -1.
export function floorIndex(sorted, x) {
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
export class RunSeries {
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

// One run's table for uPlot: the x of every step it logged, NaN and infinities included, then its values, null at a
// non-finite one (a gap the line does not span) and, on a log scale, at zero or below (no place for them); with
// smoothing, the smoothed values after the raw ones (drawn faint beneath them).
export function runTable(series, mode, smoothing, log) {
  const pairs = [];
  series.steps.forEach((step, i) => {
    const x = series.x(step, mode);
    if (x != null) pairs.push([x, series.values[i]]);
  });
  for (const [step] of series.markers) {
    const x = series.x(step, mode);
    if (x != null) pairs.push([x, null]);
  }
  pairs.sort((a, b) => a[0] - b[0]);
  const drawable = (v) => (log && v != null && v <= 0 ? null : v);
  const values = pairs.map((p) => p[1]);
  const table = [pairs.map((p) => p[0]), values.map(drawable)];
  if (smoothing) table.push(ema(values, smoothing).map(drawable));
  return table;
}

// The x range a chart shows: its data (every logged step, NaN stretches included) and every marker drawn over it
// (attempts, job events), so none lies outside. A single x is widened so that it can be drawn.
export function xRange(dataMin, dataMax, extra) {
  const xs = [dataMin, dataMax, ...extra].filter((x) => x != null && Number.isFinite(x));
  if (!xs.length) return [null, null];
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  return lo === hi ? [lo - 1, hi + 1] : [lo, hi];
}

function exponential(value, digits) {
  return value.toExponential(digits).replace("e+", "e");
}

// Labels of an axis's ticks (null: a tick left unlabelled), with just enough digits that each reads as its value
// (to a thousandth of the space between ticks): a learning rate of 0 to 3e-4 reads 0, 1e-4, 2e-4, 3e-4, not
// 0, 0, 0, 0. Very small and very large values in exponent notation.
export function tickLabels(splits) {
  const shown = splits.filter((v) => v != null);
  if (!shown.length) return splits.map(() => "");
  const largest = Math.max(...shown.map(Math.abs));
  const useExponent = largest !== 0 && (largest < 1e-3 || largest >= 1e6);
  const gaps = shown.slice(1).map((v, i) => Math.abs(v - shown[i])).filter((d) => d > 0);
  const tolerance = (gaps.length ? Math.min(...gaps) : largest || 1) / 1000;
  const label = (v, digits) => {
    if (Math.abs(v) <= tolerance) return "0"; // a float's residue next to a zero tick reads 0, not -1e-20
    return useExponent ? exponential(v, digits) : v.toFixed(digits);
  };
  for (let digits = 0; digits < 15; digits++) {
    if (shown.every((v) => Math.abs(Number(label(v, digits)) - v) <= tolerance)) {
      return splits.map((v) => (v == null ? "" : label(v, digits)));
    }
  }
  return splits.map((v) => (v == null ? "" : String(v)));
}

// The width an axis needs for its labels (`measure`: text -> CSS pixels), its ticks and the gap beside them, so a
// 7-character label is not clipped.
export const AXIS_TICKS = 10;
export const AXIS_GAP = 5;
export function axisSize(labels, measure) {
  const widths = (labels || []).filter((l) => l).map(measure);
  return Math.ceil(AXIS_TICKS + AXIS_GAP + Math.max(24, ...widths) + 4);
}

// Rows for labels placed at x (each {x, width}, pixels) so that none overlaps another: each goes in the first row
// where it clears the labels before it, by `gap`; -1 when none of `maxRows` rows has room (left unlabelled).
export function labelRows(items, maxRows, gap = 4) {
  const ends = [];
  return items.map(({ x, width }) => {
    for (let row = 0; row < maxRows; row++) {
      if (ends[row] == null || x >= ends[row] + gap) {
        ends[row] = x + width;
        return row;
      }
    }
    return -1;
  });
}

// Indices of values a line cannot show: those with no drawn neighbour on either side (a one-point series, a point
// between two NaN stretches). Alignment artefacts of joined runs (undefined) are spanned, so they are skipped when
// looking for a neighbour; null is a gap. Null when there are none.
export function isolatedPoints(ys) {
  const found = [];
  const neighbour = (i, dir) => {
    for (let j = i + dir; j >= 0 && j < ys.length; j += dir) {
      if (ys[j] !== undefined) return ys[j];
    }
    return null;
  };
  ys.forEach((y, i) => {
    if (y != null && neighbour(i, -1) == null && neighbour(i, 1) == null) found.push(i);
  });
  return found.length ? found : null;
}

// A group of runs on one chart: at every x any of its runs has, the mean, minimum and maximum of the runs whose
// logged range covers that x (a run between two of its points read by linear interpolation; outside its range, or
// next to a gap, it is left out), so runs logged at different steps still average. `tables`: per run [xs, ys],
// xs ascending, ys null at gaps. Returns [xs, mean, min, max], null where no run counts.
export function groupTable(tables) {
  const xs = [...new Set(tables.flatMap((t) => t[0]))].sort((a, b) => a - b);
  const mean = [];
  const min = [];
  const max = [];
  const cursors = tables.map(() => 0);
  for (const x of xs) {
    let sum = 0;
    let n = 0;
    let lo = Infinity;
    let hi = -Infinity;
    tables.forEach(([txs, tys], r) => {
      let i = cursors[r];
      while (i + 1 < txs.length && txs[i + 1] <= x) i += 1;
      cursors[r] = i;
      let v = null;
      if (txs[i] === x) v = tys[i];
      else if (txs[i] < x && i + 1 < txs.length && tys[i] != null && tys[i + 1] != null) {
        v = tys[i] + ((tys[i + 1] - tys[i]) * (x - txs[i])) / (txs[i + 1] - txs[i]);
      }
      if (v != null && Number.isFinite(v)) {
        sum += v; n += 1; lo = Math.min(lo, v); hi = Math.max(hi, v);
      }
    });
    mean.push(n ? sum / n : null);
    min.push(n ? lo : null);
    max.push(n ? hi : null);
  }
  return [xs, mean, min, max];
}

// The runs grouped by a param's or tag's value ("param.lr", "tag.team"): [{value, runs}] in the value's order, runs
// without it last as the group null.
export function groupRuns(runs, groupBy) {
  const [kind, ...rest] = groupBy.split(".");
  const key = rest.join(".");
  const field = kind === "tag" ? "tags" : "params";
  const groups = new Map();
  for (const run of runs) {
    const value = run[field]?.[key] ?? null;
    if (!groups.has(value)) groups.set(value, []);
    groups.get(value).push(run);
  }
  return [...groups.entries()].map(([value, members]) => ({ value, runs: members }))
    .sort((a, b) => (a.value == null) - (b.value == null) || String(a.value).localeCompare(String(b.value)));
}

// A CSV cell: quoted when it holds a separator, a quote or a line break; text a spreadsheet would run as a formula
// (= + - @, tab, carriage return first) gets a leading quote, as the server's CSV export does, but numbers are kept.
export function csvCell(value) {
  if (value == null) return "";
  if (typeof value === "number") return String(value); // NaN and Infinity by name, negatives as numbers
  let text = String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

// A panel's data as CSV: one row per point drawn, [series, key, x, value] (and `smoothed` when smoothing).
export function panelCsv(xName, rows, smoothed) {
  const header = ["series", "key", xName, "value", ...(smoothed ? ["smoothed"] : [])];
  return [header, ...rows].map((row) => row.map(csvCell).join(",")).join("\r\n") + "\r\n";
}

// A duration in seconds as an axis label of relative time: 45s, 12m, 3h05m, 2d04h.
export function fmtDuration(seconds) {
  if (seconds == null || !Number.isFinite(seconds)) return "";
  const s = Math.round(Math.abs(seconds));
  const sign = seconds < 0 ? "-" : "";
  if (s < 60) return `${sign}${s}s`;
  if (s < 3600) return `${sign}${Math.floor(s / 60)}m${s % 60 ? String(s % 60).padStart(2, "0") + "s" : ""}`;
  if (s < 86400) return `${sign}${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  return `${sign}${Math.floor(s / 86400)}d${String(Math.floor((s % 86400) / 3600)).padStart(2, "0")}h`;
}
