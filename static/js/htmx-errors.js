// An htmx request answered with an error (a 403 or 404 page, a 500) swaps nothing by default, so the click seems to
// do nothing. Show the reason instead, at the top of the element the request was to update: the error pages give it
// in their .error-reason; anything else gets a generic line. textContent only: the reason is never parsed as HTML.
(function () {
  "use strict";

  function show(target, text) {
    if (!target) return;
    var list = target.querySelector(":scope > .messages.htmx-error");
    if (!list) {
      list = document.createElement("ul");
      list.className = "messages htmx-error";
      list.setAttribute("role", "alert");
      target.prepend(list);
    }
    var item = document.createElement("li");
    item.className = "error";
    item.textContent = text;
    list.replaceChildren(item);
  }

  function reasonOf(xhr) {
    var page = new DOMParser().parseFromString(xhr.responseText || "", "text/html");
    var reason = page.querySelector(".error-reason");
    if (reason && reason.textContent.trim()) return reason.textContent.trim();
    return "The action failed (HTTP " + xhr.status + "). Reload the page and try again.";
  }

  document.addEventListener("htmx:responseError", function (event) {
    show(event.detail.target, reasonOf(event.detail.xhr));
  });
  document.addEventListener("htmx:sendError", function (event) {
    show(event.detail.target, "The server could not be reached. Check your connection and try again.");
  });
})();
