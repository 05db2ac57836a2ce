// The compare page: every run overlaid on the same charts, and the params against a chosen metric.
import { COLORS, config, start } from "./charts.js";
import { drawParallel } from "./parallel.js";

const cfg = config();
start(cfg);

const select = document.getElementById("parallel-metric");
if (select) {
  const draw = () => drawParallel(document.getElementById("parallel-plot"), cfg.runs, cfg.differing, select.value, COLORS);
  select.addEventListener("change", draw);
  draw();
}
