// The experiment page's chart panels (tracking.ChartPanel, saved through /api/v1/chart-panels/): each draws one or
// more metrics of the runs on the table's page, overlaid, or grouped by a param's or tag's value as each group's mean
// with a min-max band; with smoothing the raw line stays faint beneath. A panel downloads as PNG and its data as CSV.
// The pure parts (tables, groups, CSV) are in chartdata.js, which tests/js/ checks.

import {
  RunSeries, axisSize, fmtDuration, groupRuns, groupTable, panelCsv, runTable, tickLabels, xRange,
} from "./chartdata.js";
import { COLORS, measureAxis } from "./charts.js";

const uPlot = window.uPlot;
const HEIGHT = 260;
const RAW_ALPHA = 0.25;
const BAND_ALPHA = "33"; // hex alpha of a group's min-max band
const DASHES = [[], [6, 3], [2, 2], [10, 3, 2, 3]]; // one per key of a panel, so keys of one run tell apart
const X_NAMES = { step: "step", wall: "wall_time_s", relative: "relative_time_s" };

function csrfToken() {
  return document.querySelector("input[name=csrfmiddlewaretoken]")?.value ?? "";
}

async function api(url, method, body) {
  const response = await fetch(url, {
    method, credentials: "same-origin",
    headers: { Accept: "application/json", "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = response.status === 204 ? null : await response.json();
  if (!response.ok) {
    const fields = answer?.error?.fields ?? {};
    const named = Object.entries(fields).map(([field, errors]) => `${field}: ${errors.join(" ")}`).join("; ");
    throw new Error(named || answer?.error?.message || `HTTP ${response.status}`);
  }
  return answer;
}

function download(name, blob) {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

const fetched = new Map(); // "run:key" -> Promise<RunSeries>: panels sharing a key fetch it once

function seriesOf(run, key) {
  const id = `${run.id}:${key}`;
  if (!fetched.has(id)) {
    const query = new URLSearchParams({ key, max_points: "1000", times: "1" });
    fetched.set(id, fetch(`${run.series}?${query}`, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`${key}: HTTP ${r.status}`))))
      .then((body) => { const s = new RunSeries(run); s.add(body, true); return s; }));
  }
  return fetched.get(id);
}

export class Panel {
  constructor(board, spec) {
    this.board = board;
    this.spec = spec;
    this.figure = document.createElement("figure");
    this.figure.className = "panel chart";
    this.figure.dataset.panel = String(spec.id);
    this.figure.panel = this; // for the browser tests
    const caption = document.createElement("figcaption");
    const title = document.createElement("span");
    title.className = "panel-title";
    title.textContent = spec.title || spec.keys.join(", ");
    const how = document.createElement("span");
    how.className = "muted small";
    how.textContent = ` ${spec.scale}, ${spec.x_axis}${spec.smoothing ? `, smoothing ${spec.smoothing}` : ""}`
      + (spec.group_by ? `, grouped by ${spec.group_by}` : "");
    caption.append(title, how, this.button("PNG", "panel-png", () => this.png()),
      this.button("CSV", "panel-csv", () => this.csv()));
    if (board.cfg.canWrite) {
      caption.append(this.button("Edit", "panel-edit", () => board.edit(this)),
        this.button("Remove", "panel-remove", () => this.remove()));
    }
    this.plotEl = document.createElement("div");
    this.plotEl.className = "plot";
    this.note = document.createElement("div");
    this.note.className = "chart-note muted small";
    this.figure.append(caption, this.plotEl, this.note);
    this.plot = null;
  }

  button(label, cls, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = `link small ${cls}`;
    b.textContent = label;
    b.addEventListener("click", onClick);
    return b;
  }

  size() {
    return { width: Math.max(240, this.plotEl.clientWidth || 480), height: HEIGHT };
  }

  async load() {
    const runs = this.board.cfg.runs;
    try {
      this.series = await Promise.all(this.spec.keys.map((key) => Promise.all(runs.map((run) => seriesOf(run, key)))));
      this.note.textContent = runs.length ? "" : "No runs on this page of the table.";
    } catch (error) {
      this.series = this.spec.keys.map(() => []);
      this.note.textContent = `Could not load: ${error.message}`;
    }
    this.render();
  }

  // What the panel draws: tables (each [xs, ...ys]) and, per y, its line's style; and the rows of its CSV.
  build() {
    const { x_axis: mode, smoothing, scale, group_by: groupBy } = this.spec;
    const log = scale === "log";
    const runs = this.board.cfg.runs;
    const tables = [];
    const lines = [];
    const bands = [];
    const rows = [];
    const drawable = (v) => (log && v != null && v <= 0 ? null : v);
    this.spec.keys.forEach((key, k) => {
      const dash = DASHES[k % DASHES.length];
      const perRun = (this.series?.[k] ?? []).map((s) => runTable(s, mode, smoothing, log));
      if (!groupBy) {
        perRun.forEach((table, r) => {
          if (!table[0].length) return;
          const stroke = COLORS[(runs.length > 1 ? r : k) % COLORS.length];
          const label = `${runs[r].name} · ${key}`;
          tables.push(table);
          if (smoothing) lines.push({ label: `${label} (raw)`, stroke, alpha: RAW_ALPHA, width: 1, dash });
          lines.push({ label, stroke, width: 1.5, dash });
          table[0].forEach((x, i) => rows.push([runs[r].name, key, x, table[1][i], ...(smoothing ? [table[2][i]] : [])]));
        });
        return;
      }
      const index = new Map(runs.map((run, r) => [run.id, r]));
      groupRuns(runs, groupBy).forEach((group, g) => {
        const members = group.runs.map((run) => perRun[index.get(run.id)]).filter((t) => t && t[0].length);
        if (!members.length) return;
        const stroke = COLORS[g % COLORS.length];
        const label = `${groupBy}=${group.value ?? "(none)"} (${members.length} run${members.length > 1 ? "s" : ""}) · ${key}`;
        const raw = groupTable(members.map((t) => [t[0], t[1]]));
        const shown = smoothing ? groupTable(members.map((t) => [t[0], t[2]])) : raw;
        const first = tables.reduce((n, t) => n + t.length - 1, 0) + 1; // this table's first series index
        const table = [raw[0], ...(smoothing ? [raw[1].map(drawable)] : []), ...shown.slice(1).map((ys) => ys.map(drawable))];
        tables.push(table);
        if (smoothing) lines.push({ label: `${label} mean (raw)`, stroke, alpha: RAW_ALPHA, width: 1, dash });
        const mean = first + (smoothing ? 1 : 0);
        lines.push({ label: `${label} mean`, stroke, width: 2, dash });
        lines.push({ label: `${label} min`, stroke, alpha: 0, width: 0, band: true });
        lines.push({ label: `${label} max`, stroke, alpha: 0, width: 0, band: true });
        bands.push({ series: [mean + 2, mean + 1], fill: `${stroke}${BAND_ALPHA}` });
        raw[0].forEach((x, i) => rows.push([`${groupBy}=${group.value ?? ""}`, key, x, raw[1][i],
          ...(smoothing ? [shown[1][i]] : []), shown[2][i], shown[3][i]]));
      });
    });
    return { tables, lines, bands, rows };
  }

  render() {
    const { tables, lines, bands } = this.build();
    this.built = { lines: lines.map((l) => l.label), bands: bands.length };
    this.plot?.destroy();
    this.plot = null;
    if (!tables.length) {
      if (!this.note.textContent) this.note.textContent = "Nothing logged for these keys by the runs on this page.";
      return;
    }
    const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    const mode = this.spec.x_axis;
    const opts = {
      ...this.size(),
      scales: { x: { time: mode === "wall", range: (u, min, max) => xRange(min, max, []) },
        y: this.spec.scale === "log" ? { distr: 3, log: 10 } : {} },
      series: [
        { label: mode === "step" ? "step" : "time", value: mode === "relative" ? (u, v) => (v == null ? "—" : fmtDuration(v)) : undefined },
        ...lines.map((l) => ({ label: l.label, stroke: l.stroke, width: l.width, alpha: l.alpha, dash: l.dash,
          spanGaps: false, points: { show: false }, show: true })),
      ],
      bands,
      axes: [mode === "relative" ? { values: (u, splits) => splits.map(fmtDuration) } : {},
        { values: (u, splits) => tickLabels(splits), size: (u, values, i) => axisSize(values, (t) => measureAxis(u, i, t)) }],
      legend: { show: true },
    };
    this.plot = new uPlot(opts, data, this.plotEl);
  }

  fileName(ext) {
    const base = (this.spec.title || this.spec.keys.join("-")).replace(/[^\w.-]+/g, "_").slice(0, 80);
    return `panel-${this.spec.id}-${base}.${ext}`;
  }

  // The chart's canvas on white, under the panel's title (uPlot's legend is HTML: the title says what is drawn).
  png() {
    if (!this.plot) return;
    const source = this.plot.ctx.canvas;
    const top = 28 * uPlot.pxRatio;
    const canvas = document.createElement("canvas");
    canvas.width = source.width;
    canvas.height = source.height + top;
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = "#1b2330";
    ctx.font = `${14 * uPlot.pxRatio}px system-ui, sans-serif`;
    ctx.fillText(this.figure.querySelector("figcaption").textContent.replace(/PNG|CSV|Edit|Remove/g, "").trim(), 8, 19 * uPlot.pxRatio);
    ctx.drawImage(source, 0, top);
    canvas.toBlob((blob) => download(this.fileName("png"), blob), "image/png");
  }

  csv() {
    const { rows } = this.build();
    const extra = this.spec.group_by ? ["min", "max"] : [];
    let text = panelCsv(X_NAMES[this.spec.x_axis], rows, this.spec.smoothing > 0);
    if (extra.length) { // the band's edges after the values
      const [header, ...rest] = text.split("\r\n");
      text = [`${header},${extra.join(",")}`, ...rest].join("\r\n");
    }
    download(this.fileName("csv"), new Blob([text], { type: "text/csv" }));
  }

  async remove() {
    try {
      await api(`${this.board.cfg.api}${this.spec.id}/`, "DELETE");
      this.plot?.destroy();
      this.figure.remove();
      this.board.panels = this.board.panels.filter((p) => p !== this);
    } catch (error) {
      this.note.textContent = `Not removed: ${error.message}`;
    }
  }
}

export class Board {
  constructor(cfg) {
    this.cfg = cfg;
    this.grid = document.getElementById("panel-grid");
    this.panels = [];
  }

  add(spec) {
    const panel = new Panel(this, spec);
    this.grid.append(panel.figure);
    this.panels.push(panel);
    return panel.load();
  }

  // The new-panel form, filled with a saved panel's settings: submitting it saves them to that panel (PATCH).
  edit(panel) {
    const form = document.getElementById("panel-form");
    const { spec } = panel;
    form.elements.title.value = spec.title;
    for (const option of form.elements.keys.options) option.selected = spec.keys.includes(option.value);
    form.elements.scale.value = spec.scale;
    form.elements.x_axis.value = spec.x_axis;
    form.elements.smoothing.value = String(spec.smoothing);
    form.elements.group_by.value = spec.group_by;
    this.editing = panel;
    document.getElementById("panel-save").textContent = "Save panel";
    document.getElementById("panel-new").open = true;
  }

  bindForm() {
    const form = document.getElementById("panel-form");
    if (!form) return;
    const error = document.getElementById("panel-error");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const data = new FormData(form);
      const body = {
        title: data.get("title") || "", keys: data.getAll("keys"), scale: data.get("scale"),
        x_axis: data.get("x_axis"), smoothing: Number(data.get("smoothing") || 0),
        group_by: data.get("group_by") || "",
      };
      const editing = this.editing;
      try {
        if (editing) {
          const spec = await api(`${this.cfg.api}${editing.spec.id}/`, "PATCH", body);
          const replaced = new Panel(this, spec);
          editing.plot?.destroy();
          editing.figure.replaceWith(replaced.figure);
          this.panels[this.panels.indexOf(editing)] = replaced;
          this.editing = null;
          document.getElementById("panel-save").textContent = "Add panel";
          await replaced.load();
        } else {
          const spec = await api(this.cfg.api, "POST", { ...body, experiment: this.cfg.experiment,
            position: this.panels.length });
          await this.add(spec);
        }
        error.textContent = "";
      } catch (e) {
        error.textContent = e.message;
      }
    });
  }

  start() {
    this.bindForm();
    window.tidalPanels = this; // for the browser tests and the console
    return Promise.all(this.cfg.panels.map((spec) => this.add(spec)));
  }
}

const element = document.getElementById("panel-config");
if (element) new Board(JSON.parse(element.textContent)).start();
