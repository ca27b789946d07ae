/* Spark jobs on a page (templates/refresh/_job.html): while a job waits or runs, ask the API
   for it every second (GET /api/jobs/<id>/, with the session's cookie) and show its state
   and how long it has waited or run. When it finishes, fill in its answer without a
   reload: fetch this page again and put its fresh copy of the section named by
   data-swap in place (the server now renders the answer), or render a console script's
   statements (data-render="statements"), or go on to the object a successful job made
   (data-done-url). */
(function () {
  "use strict";
  var ACTIVE = { QUEUED: true, RUNNING: true };

  function seconds(from) {
    if (!from) { return ""; }
    var elapsed = Math.max(0, Math.round((Date.now() - Date.parse(from)) / 1000));
    return elapsed + " s";
  }

  function show(block, job) {
    var badge = block.querySelector(".job-state");
    if (badge) {
      badge.textContent = job.state;
      badge.className = "badge job-state job-state-" + job.state.toLowerCase();
    }
    var progress = block.querySelector(".job-progress");
    if (progress) {
      if (job.state === "QUEUED") {
        progress.textContent = "waiting for a refresh worker's Spark for " + seconds(job.created_at);
      } else if (job.state === "RUNNING") {
        var done = job.result && job.result.results ? job.result.results.length : 0;
        progress.textContent = "running on " + job.worker + " for " + seconds(job.started_at) +
          (done ? ", " + done + " statement" + (done === 1 ? "" : "s") + " done" : "");
      } else {
        progress.textContent = job.error && job.error.message ? job.error.message : "";
      }
    }
    if (!ACTIVE[job.state]) {
      var cancel = block.querySelector(".job-cancel-form");
      if (cancel) { cancel.remove(); }
    }
  }

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  /* One console statement's result, as templates/refresh/console.html shows it; `tableUrl`
     is the page of a materialized table with NAMESPACE and NAME to fill in. */
  function statement(result, tableUrl) {
    var box = element("div", "statement-result " + (result.ok ? "ok" : "error"));
    var head = element("div", "statement-head");
    head.appendChild(element("span", "badge " + (result.ok ? "ok" : "err"), result.ok ? "ok" : "error"));
    head.appendChild(document.createTextNode(" "));
    head.appendChild(element("span", "muted small", "line " + result.line + ", column " + result.column));
    if (result.table && tableUrl) {
      var dot = result.table.lastIndexOf(".");
      var parts = { NAMESPACE: result.table.slice(0, dot), NAME: result.table.slice(dot + 1) };
      var page = tableUrl.replace(/NAMESPACE|NAME/g, function (placeholder) {
        return encodeURIComponent(parts[placeholder]);
      });
      head.appendChild(document.createTextNode(" "));
      var link = element("a", "result-table", result.table);
      link.href = page;
      head.appendChild(link);
      if (result.run_id) {
        head.appendChild(document.createTextNode(" "));
        var run = element("a", "result-job", "job " + result.run_id);
        run.href = page + "#run-" + result.run_id;
        head.appendChild(run);
      }
    }
    box.appendChild(head);
    box.appendChild(element("pre", "sql statement-text", result.statement));
    box.appendChild(element("p", "result-message" + (result.ok ? "" : " errorlist nonfield"), result.message));
    if (!result.ok && result.error && result.error.line) {
      box.appendChild(element("p", "error-position small", "At line " + result.error.line +
        ", column " + result.error.column + " of the script."));
    }
    if (result.query && window.lakeviewQueryGrid) {
      box.appendChild(window.lakeviewQueryGrid(result.query, result.error));  // query_results.js
    } else if (result.columns && result.columns.length) {
      var table = element("table", "list small result-rows");
      var head_row = element("tr");
      result.columns.forEach(function (name) { head_row.appendChild(element("th", "", name)); });
      var thead = element("thead");
      thead.appendChild(head_row);
      table.appendChild(thead);
      var body = element("tbody");
      (result.rows || []).forEach(function (row) {
        var tr = element("tr");
        row.forEach(function (value) { tr.appendChild(element("td", "", value === null ? "" : value)); });
        body.appendChild(tr);
      });
      table.appendChild(body);
      box.appendChild(table);
    }
    return box;
  }

  /* The pending statement's place takes the job's results, numbered on from it
     (#result-<n>), as if the page had run them. */
  function renderStatements(block, job) {
    var pending = block.closest(".statement-result") || block;
    var results = (job.result && job.result.results) || [];
    if (!results.length && job.error) {
      var grid = pending.querySelector(".query-result");  // a query's grid says how it ended
      results = [{ ok: false, line: "?", column: "?", statement: job.summary, message: job.error.message,
        query: grid ? { id: grid.getAttribute("data-query-id") } : null }];
    }
    var number = parseInt((pending.id || "result-1").replace("result-", ""), 10) || 1;
    var tableUrl = block.getAttribute("data-table-url");
    var nodes = results.map(function (result, index) {
      var node = statement(result, tableUrl);
      node.id = "result-" + (number + index);
      return node;
    });
    pending.replaceWith.apply(pending, nodes);
  }

  function swap(block, selector) {
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) { return response.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector(selector);
        var current = document.querySelector(selector);
        if (fresh && current) {
          current.replaceWith(fresh);
          Array.prototype.forEach.call(fresh.querySelectorAll("[data-job-url]"), watch);
        }
      });
  }

  function finished(block, job) {
    var done = block.getAttribute("data-done-url");
    if (done && job.state === "SUCCEEDED") {
      window.location.assign(done);
      return;
    }
    if (block.getAttribute("data-render") === "statements") {
      renderStatements(block, job);
      return;
    }
    var selector = block.getAttribute("data-swap");
    if (selector) { swap(block, selector); }
  }

  function watch(block) {
    if (!ACTIVE[block.getAttribute("data-job-state")]) { return; }
    var url = block.getAttribute("data-job-url");
    function tick() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (job) {
          if (!job) { window.setTimeout(tick, 2000); return; }
          show(block, job);
          if (ACTIVE[job.state]) { window.setTimeout(tick, 1000); } else { finished(block, job); }
        })
        .catch(function () { window.setTimeout(tick, 2000); });
    }
    window.setTimeout(tick, 500);
  }

  Array.prototype.forEach.call(document.querySelectorAll("[data-job-url]"), watch);
})();
