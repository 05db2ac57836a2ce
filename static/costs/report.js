// The cost pages: the stacked cost chart of /costs/ and the utilization charts of /costs/admin/ (uPlot, loaded as a
// global by costs/_assets.html, over data the page rendered with json_script), tables sorted in the browser, and
// the range inputs (a month, or a start and an end: typing one clears the other, as the report takes one or the
// other).

const uPlot = window.uPlot;

const COLORS = ["#1565c0", "#ef6c00", "#2e7d32", "#c62828", "#6a1b9a", "#00838f", "#ad1457", "#558b2f", "#4e342e",
  "#283593", "#f9a825", "#37474f"];
const OTHER_COLOR = "#9aa3ae";
const DAY = 86400;
const HEIGHT = 300;

const utc = (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC");
const fmtDay = uPlot.fmtDate("{YYYY}-{MM}-{DD}");
const fmtHour = uPlot.fmtDate("{YYYY}-{MM}-{DD} {HH}:00");
// An hourly report's periods start inside a day: those show their hour.
const dayOf = (u, ts) => (ts == null ? "–" : (ts % DAY ? fmtHour : fmtDay)(utc(ts)));

function pageData(id) {
  const element = document.getElementById(id);
  return element ? JSON.parse(element.textContent) : null;
}

function widthOf(element) {
  return Math.max(320, element.clientWidth);
}

// Bars centred on each period: the x range is widened by half the shortest period on each side.
function xScale(xs) {
  const gaps = xs.slice(1).map((x, i) => x - xs[i]);
  const half = (gaps.length ? Math.min(...gaps) : DAY) / 2;
  return { time: true, range: () => [xs[0] - half, xs.at(-1) + half] };
}

const fromZero = { range: (u, min, max) => [0, max > 0 ? max * 1.05 : 1] };

function resizeWith(element, plot) {
  window.addEventListener("resize", () => plot.setSize({ width: widthOf(element), height: HEIGHT }));
}

// Stacked bars: each group is drawn at its own cost plus that of the groups below it, tallest first, so each shorter
// stack paints over the one above; the legend shows each group's own cost, not the running sum.
function stackedCostChart(element, chart) {
  const sums = [];
  let running = chart.x.map(() => 0);
  for (const entry of chart.series) {
    running = running.map((value, i) => value + entry.values[i]);
    sums.push(running);
  }
  const drawn = [...chart.series.keys()].reverse();
  const colour = (i) => (chart.series[i].label === "other" ? OTHER_COLOR : COLORS[i % COLORS.length]);
  const bars = uPlot.paths.bars({ size: [0.8, 80] });
  const money = (value) => (value == null ? "–" : `${value.toFixed(2)} ${chart.currency}`);
  const plot = new uPlot({
    width: widthOf(element), height: HEIGHT, tzDate: utc,
    scales: { x: xScale(chart.x), y: fromZero },
    axes: [{}, { label: chart.currency, size: 70 }],
    series: [{ label: "period", value: dayOf }, ...drawn.map((i) => ({
      label: chart.series[i].label, stroke: colour(i), fill: colour(i), width: 0, paths: bars,
      points: { show: false },
      value: (u, v, si, index) => money(index == null ? null : chart.series[i].values[index]),
    }))],
  }, [chart.x, ...drawn.map((i) => sums[i])], element);
  element.plot = plot;
  resizeWith(element, plot);
}

// Allocated device-hours per day as bars, the current inventory's capacity as a line over them.
function utilizationChart(element, flavor) {
  const hours = (u, value) => (value == null ? "–" : `${value.toFixed(1)} device-h`);
  const plot = new uPlot({
    width: widthOf(element), height: HEIGHT, tzDate: utc,
    scales: { x: xScale(flavor.x), y: fromZero },
    axes: [{}, { label: "device-hours", size: 70 }],
    series: [{ label: "day", value: dayOf },
      { label: "allocated", stroke: COLORS[0], fill: "#1565c055", paths: uPlot.paths.bars({ size: [0.8, 80] }),
        points: { show: false }, value: hours },
      { label: "capacity", stroke: COLORS[3], width: 2, paths: uPlot.paths.stepped({ align: 0 }),
        points: { show: false }, value: hours }],
  }, [flavor.x, flavor.allocated, flavor.capacity], element);
  element.plot = plot;
  resizeWith(element, plot);
}

// Click a header's button to sort by that column, again to reverse; numbers sort by the cell's data-value.
function sortable(table) {
  const headers = [...table.tHead.rows[0].cells];
  headers.forEach((header, column) => {
    const button = header.querySelector("button");
    if (!button) return;
    button.addEventListener("click", () => {
      const ascending = header.getAttribute("aria-sort") !== "ascending";
      headers.forEach((h) => h.removeAttribute("aria-sort"));
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const numeric = header.dataset.type === "number";
      const key = (row) => {
        const cell = row.cells[column];
        const raw = cell?.dataset.value ?? cell?.textContent.trim() ?? "";
        return numeric ? Number.parseFloat(raw) : raw;
      };
      const body = table.tBodies[0];
      const rows = [...body.rows].sort((a, b) => {
        const order = numeric ? key(a) - key(b) : key(a).localeCompare(key(b), undefined, { numeric: true });
        return ascending ? order : -order;
      });
      body.append(...rows);
    });
  });
}

function rangeInputs() {
  const month = document.getElementById("range-month");
  const ends = ["range-start", "range-end"].map((id) => document.getElementById(id));
  if (!month) return;
  month.addEventListener("input", () => { if (month.value) ends.forEach((input) => { input.value = ""; }); });
  ends.forEach((input) => input.addEventListener("input", () => { if (input.value) month.value = ""; }));
}

const cost = pageData("cost-chart-data");
const costElement = document.getElementById("cost-chart");
if (cost && costElement) stackedCostChart(costElement, cost);
const utilization = pageData("utilization-data");
if (utilization) {
  document.querySelectorAll(".util-chart").forEach((element) => {
    utilizationChart(element, utilization.utilization[Number(element.dataset.index)]);
  });
}
document.querySelectorAll("table.sortable").forEach(sortable);
rangeInputs();
