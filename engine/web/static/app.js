// Small and hand-written: confirm dialogs for action forms, and auto-refresh of an active run.
// The page works without it (forms post directly; reload by hand).
document.addEventListener("submit", function (event) {
  var form = event.target;
  var question = form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
(function () {
  var seconds = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (seconds > 0) {
    window.setTimeout(function () { window.location.reload(); }, seconds * 1000);
  }
})();
