/* While a refresh run of this page is QUEUED or RUNNING, ask the API for its state every
   2 s (GET /api/refresh-runs/<id>/, with the session's cookie) and update its row
   (tr#run-<id>, td.run-state); when one finishes, reload the page so that the charts and
   the facts are current. */
(function () {
  "use strict";
  var table = document.getElementById("runs");
  if (!table) { return; }
  var template = table.getAttribute("data-run-url"); // ".../refresh-runs/0/"
  var ACTIVE = { QUEUED: true, RUNNING: true };

  function urlOf(id) { return template.replace(/\/0\/$/, "/" + id + "/"); }

  function activeRows() {
    return Array.prototype.slice.call(table.querySelectorAll("tr.run-active"));
  }

  function update(row, run) {
    var cell = row.querySelector(".run-state");
    if (cell && cell.textContent !== run.state) {
      cell.textContent = run.state;
      cell.className = "run-state run-state-" + run.state.toLowerCase();
    }
    row.setAttribute("data-state", run.state);
    var action = row.querySelector(".run-action");
    if (action && run.action) { action.textContent = run.action; }
    var started = row.querySelector(".run-started");
    if (started && run.started_at && !started.textContent.trim()) {
      started.textContent = run.started_at.replace("T", " ").slice(0, 19);
    }
    return !ACTIVE[run.state];
  }

  function poll() {
    var rows = activeRows();
    if (!rows.length) { return; }
    var requests = rows.map(function (row) {
      var id = row.getAttribute("data-run-id");
      return fetch(urlOf(id), { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (run) { return run ? update(row, run) : false; })
        .catch(function () { return false; });
    });
    Promise.all(requests).then(function (finished) {
      if (finished.some(Boolean)) {
        window.location.reload();
      } else {
        window.setTimeout(poll, 2000);
      }
    });
  }

  window.setTimeout(poll, 2000);
})();
