// Parallel coordinates in plain SVG: one vertical axis per param that differs between the compared runs, the last one
// the chosen metric (its last value); one polyline per run, in the run's chart colour.

const SVG = "http://www.w3.org/2000/svg";
const HEIGHT = 260;
const PAD = { top: 24, bottom: 36, side: 60 };

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text != null) node.textContent = text;
  return node;
}

const isNumber = (v) => v != null && v !== "" && Number.isFinite(Number(v));

// An axis maps a value to 0..1: numbers linearly (or by log when positive and spanning two decades, as learning
// rates in a sweep do), anything else by its rank among the distinct values.
function axis(name, values) {
  const present = values.filter((v) => v != null);
  if (present.length && present.every(isNumber)) {
    const nums = present.map(Number);
    let lo = Math.min(...nums);
    let hi = Math.max(...nums);
    const log = lo > 0 && hi / lo >= 100;
    const f = log ? Math.log10 : (v) => v;
    [lo, hi] = [f(lo), f(hi)];
    const span = hi - lo || 1;
    return { name, ticks: [Math.min(...nums), Math.max(...nums)].map((v) => [(f(v) - lo) / span, String(+v.toPrecision(4))]),
      at: (v) => (isNumber(v) ? (f(Number(v)) - lo) / span : null) };
  }
  const distinct = [...new Set(present.map(String))].sort();
  const step = distinct.length > 1 ? 1 / (distinct.length - 1) : 0.5;
  return { name, ticks: distinct.map((v, i) => [distinct.length > 1 ? i * step : 0.5, v]),
    at: (v) => (v == null ? null : (distinct.length > 1 ? distinct.indexOf(String(v)) * step : 0.5)) };
}

export function drawParallel(container, runs, params, metric, colors) {
  const width = Math.max(320, container.clientWidth);
  const names = params.length ? params : [...new Set(runs.flatMap((r) => Object.keys(r.params)))].slice(0, 8);
  const axes = names.map((p) => axis(p, runs.map((r) => r.params[p])));
  axes.push(axis(metric, runs.map((r) => r.summary[metric])));
  const gap = axes.length > 1 ? (width - 2 * PAD.side) / (axes.length - 1) : 0;
  const xOf = (i) => (axes.length > 1 ? PAD.side + i * gap : width / 2);
  const yOf = (t) => PAD.top + (1 - t) * (HEIGHT - PAD.top - PAD.bottom);
  const svg = el("svg", { width, height: HEIGHT, viewBox: `0 0 ${width} ${HEIGHT}`, role: "img",
    "aria-label": `Params against ${metric}` });
  axes.forEach((a, i) => {
    const x = xOf(i);
    svg.append(el("line", { x1: x, x2: x, y1: yOf(1), y2: yOf(0), class: "pc-axis" }));
    svg.append(el("text", { x, y: HEIGHT - 12, "text-anchor": "middle", class: i === axes.length - 1 ? "pc-name metric" : "pc-name" }, a.name));
    for (const [t, label] of a.ticks) svg.append(el("text", { x: x + 4, y: yOf(t) + 4, class: "pc-tick" }, label));
  });
  runs.forEach((run, r) => {
    const values = [...names.map((p) => run.params[p]), run.summary[metric]];
    // A run without a value on an axis breaks its line there instead of inventing one.
    let d = "";
    let pen = "M";
    values.forEach((v, i) => {
      const t = axes[i].at(v);
      if (t == null) { pen = "M"; return; }
      d += `${pen}${xOf(i)},${yOf(t)} `;
      pen = "L";
    });
    const path = el("path", { d, class: "pc-line", stroke: colors[r % colors.length] });
    path.append(el("title", {}, run.name));
    svg.append(path);
  });
  const legend = document.createElement("div");
  legend.className = "pc-legend";
  runs.forEach((run, r) => {
    const item = document.createElement("span");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colors[r % colors.length];  // a style property, not a style attribute the CSP refuses
    item.append(swatch, document.createTextNode(run.name));
    legend.append(item);
  });
  container.replaceChildren(svg, legend);
}
