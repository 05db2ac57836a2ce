// Behaviour the pages declare with data attributes: the Content-Security-Policy runs no inline script or event
// handler attribute (onclick, onsubmit...), only files from /static.
//   data-confirm="Question?" on a form or its submit button: asks before submitting.
//   data-autosubmit on a form field: submits the form when the field changes.
(function () {
  "use strict";

  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    var question = (button && button.getAttribute("data-confirm")) || event.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  }, true);

  document.addEventListener("change", function (event) {
    var field = event.target;
    if (field.form && field.hasAttribute("data-autosubmit")) {
      field.form.submit();
    }
  });
})();
