// The run page: its charts, and while the run is RUNNING a live mode that appends new points and stops when the
// run ends (its status comes from the run API).
import { config, start } from "./charts.js";

const cfg = config();
const view = start(cfg);

if (cfg.live) {
  const toggle = document.getElementById("live");
  const state = document.getElementById("live-state");
  const run = cfg.runs[0];

  const poll = async () => {
    // A zoomed view shows a fixed step range: appending would move it under the reader.
    if (toggle.checked && view.range == null) {
      try {
        await Promise.all(view.charts.map((c) => c.append()));
        const response = await fetch(run.api, { credentials: "same-origin", headers: { Accept: "application/json" } });
        const body = await response.json();
        state.textContent = `updated ${new Date().toLocaleTimeString()}`;
        if (body.status !== "RUNNING") {
          const badge = document.getElementById("run-status");
          badge.textContent = body.status.charAt(0) + body.status.slice(1).toLowerCase();
          badge.className = `badge run-${body.status.toLowerCase()}`;
          toggle.checked = false;
          toggle.disabled = true;
          state.textContent = "the run has ended";
          return;
        }
      } catch (error) {
        state.textContent = `paused: ${error.message}`;
      }
    }
    setTimeout(poll, cfg.pollSeconds * 1000);
  };
  setTimeout(poll, cfg.pollSeconds * 1000);
}
