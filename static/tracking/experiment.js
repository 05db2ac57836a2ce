// The runs table: "Compare selected" waits until a run is ticked (and up to the most a chart can show).
const form = document.getElementById("compare-form");
const button = document.getElementById("compare-button");
const hint = document.getElementById("compare-hint");
const most = Number(button.dataset.most);

function update() {
  const ticked = form.querySelectorAll('input[name="run"]:checked').length;
  button.disabled = ticked === 0 || ticked > most;
  hint.textContent = ticked === 0 ? `tick runs to compare, up to ${most}`
    : ticked > most ? `${ticked} ticked: compare at most ${most}` : `${ticked} ticked`;
}

form.addEventListener("change", update);
update(); // a page restored from the browser's cache keeps its ticks
