// MLflow's client prints links into its own UI ("#/experiments/<id>/runs/<id>"): the fragment never reaches the
// server, so the page maps it to Tidal's pages here. Ids are Tidal's, so the mapping is exact. Anything else opens
// the experiments page the page links to.
(function () {
  "use strict";
  const hash = window.location.hash;
  const run = hash.match(/^#\/experiments\/\d+\/runs\/(\d+)/);
  const experiment = hash.match(/^#\/experiments\/(\d+)/);
  if (run) {
    window.location.replace("/runs/" + run[1] + "/");
  } else if (experiment) {
    window.location.replace("/experiments/" + experiment[1] + "/");
  } else {
    window.location.replace(document.querySelector("#mlflow-link a").getAttribute("href"));
  }
})();
