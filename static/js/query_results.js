/* Query results (templates/refresh/_query_results.html): each block asks its rows URL
   (GET /api/queries/<id>/rows, with the session's cookie) for the rows after those shown,
   every quarter second at first and then less often while the query waits or runs, so
   that the grid fills in as the worker stores them; the header shows each column's Spark
   type once known, the status line the rows kept, the duration and whether the result was
   cut. Cancel asks the API to cancel the query's job (its Spark job group is cancelled on
   the worker). Once the query ends, the downloads appear, and "More rows" fetches the next
   page; a result that is gone (its hours ran out, or only its user's newest are kept) shows
   why, once, and neither. A 403 (a table the query read may no longer be read) shows its message instead. jobs.js asks `window.lakeviewQueryGrid(query)` for the block of a query a console
   script's job ran: the block already on the page, or a new one. */
(function () {
  "use strict";
  var PAGE_ROWS = 200;
  var ACTIVE = { QUEUED: true, RUNNING: true };

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function csrfToken() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    if (input) { return input.value; }
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  function shown(value) {
    if (value === null || value === undefined) { return null; }
    if (typeof value === "object") { return JSON.stringify(value); }
    return String(value);
  }

  function plural(count, word) {
    return count.toLocaleString() + " " + word + (count === 1 ? "" : "s");
  }

  function watch(block) {
    if (block.getAttribute("data-watched")) { return; }
    block.setAttribute("data-watched", "1");
    var url = block.getAttribute("data-rows-url");
    var table = block.querySelector(".query-grid");
    var head = table.querySelector("thead");
    var body = table.querySelector("tbody");
    var more = block.querySelector(".query-more");
    var cancel = block.querySelector(".query-cancel");
    var loaded = body.querySelectorAll("tr").length;
    var wanted = Math.max(PAGE_ROWS, loaded);
    var delay = 250;
    var last = null;

    function header(columns) {
      if (head.querySelector("tr") || !columns || !columns.length) { return; }
      var row = element("tr");
      columns.forEach(function (column) {
        var th = element("th");
        th.appendChild(element("span", "query-column", column.name));
        th.appendChild(document.createTextNode(" "));
        th.appendChild(element("span", "query-type muted", column.type));
        row.appendChild(th);
      });
      head.appendChild(row);
    }

    function append(rows) {
      var fragment = document.createDocumentFragment();
      rows.forEach(function (values) {
        var tr = element("tr");
        values.forEach(function (value) {
          var text = shown(value);
          tr.appendChild(text === null ? element("td", "query-null", "NULL") : element("td", "", text));
        });
        fragment.appendChild(tr);
      });
      body.appendChild(fragment);
      loaded += rows.length;
    }

    function status(page) {
      block.setAttribute("data-state", page.state);
      var badge = block.querySelector(".query-state");
      badge.textContent = page.state;
      badge.className = "badge query-state job-state-" + page.state.toLowerCase();
      var count = block.querySelector(".query-count");
      if (page.state === "QUEUED") {
        count.textContent = "waiting for a worker";
      } else if (ACTIVE[page.state]) {
        count.textContent = page.row_count ? plural(page.row_count, "row") + " so far" : "running";
      } else {
        count.textContent = page.error && !page.row_count ? "" : plural(page.row_count, "row");
      }
      var duration = block.querySelector(".query-duration");
      duration.textContent = page.duration_seconds === null ? "" : page.duration_seconds.toFixed(2) + " s";
      block.querySelector(".query-cut").textContent = page.cut_message || "";
      var error = block.querySelector(".query-error");
      error.textContent = page.error && page.error.message ? page.error.message : "";
      error.hidden = !error.textContent;
      cancel.hidden = !ACTIVE[page.state];
      var gone = Boolean(page.error && page.error.type === "Gone");
      var downloadable = page.state === "SUCCEEDED" && !gone;
      Array.prototype.forEach.call(block.querySelectorAll(".query-download"), function (link) {
        link.hidden = !downloadable;
      });
      // A result that is gone has no more rows to fetch: only running the query again helps.
      more.hidden = ACTIVE[page.state] || gone || loaded >= page.row_count;
    }

    function refused(message) {
      var error = block.querySelector(".query-error");
      error.textContent = message || "You may no longer read this result";
      error.hidden = false;
      body.textContent = "";
      loaded = 0;
      more.hidden = true;
      Array.prototype.forEach.call(block.querySelectorAll(".query-download"), function (link) {
        link.hidden = true;
      });
    }

    function tick() {
      var limit = Math.max(1, wanted - loaded);
      fetch(url + "?offset=" + loaded + "&limit=" + limit, {
        credentials: "same-origin", headers: { Accept: "application/json" }
      })
        .then(function (response) {
          if (response.status === 403) {
            // A table or view the query read may no longer be read: say so and stop asking.
            return response.json().then(function (body) { refused(body.error); return false; });
          }
          return response.ok ? response.json() : null;
        })
        .then(function (page) {
          if (page === false) { return; }
          if (!page) { window.setTimeout(tick, 2000); return; }
          last = page;
          header(page.columns);
          if (page.offset === loaded && loaded < wanted) { append(page.rows.slice(0, wanted - loaded)); }
          status(page);
          if (ACTIVE[page.state]) {
            window.setTimeout(tick, delay);
            delay = Math.min(1000, delay * 1.25);
          } else if (loaded < wanted && loaded < page.row_count) {
            tick();  // the rest of the page, stored after the last look
          }
        })
        .catch(function () { window.setTimeout(tick, 2000); });
    }

    more.addEventListener("click", function () {
      wanted = loaded + PAGE_ROWS;
      more.hidden = true;
      tick();
    });

    cancel.addEventListener("click", function () {
      var target = block.getAttribute("data-cancel-url");
      if (!target) { return; }
      cancel.disabled = true;
      fetch(target, {
        method: "POST", credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": csrfToken() }
      }).then(function () {
        cancel.disabled = false;
        if (last && !ACTIVE[last.state]) { return; }
        delay = 250;
      });
    });

    if (block.getAttribute("data-gone")) {
      more.hidden = true;  // the server said why (once); there is nothing to ask for
    } else if (ACTIVE[block.getAttribute("data-state")] || loaded < wanted) {
      window.setTimeout(tick, ACTIVE[block.getAttribute("data-state")] ? 150 : 0);
    } else {
      more.hidden = true;
    }
  }

  /* A block for `query` (a statement result's `query`): the one on the page, or a new one. */
  function grid(query, error) {
    var existing = document.getElementById("query-" + query.id);
    if (existing) { return existing; }
    var block = element("div", "query-result");
    block.id = "query-" + query.id;
    block.setAttribute("data-query-id", query.id);
    block.setAttribute("data-rows-url", query.rows_url);
    block.setAttribute("data-state", error ? "FAILED" : "RUNNING");
    if (query.job_cancel_url) { block.setAttribute("data-cancel-url", query.job_cancel_url); }
    var line = element("p", "query-status small");
    line.appendChild(element("span", "badge query-state", query.state));
    ["query-count", "query-duration muted", "query-cut"].forEach(function (name) {
      line.appendChild(document.createTextNode(" "));
      line.appendChild(element("span", name));
    });
    var cancel = element("button", "query-cancel", "Cancel");
    cancel.type = "button";
    cancel.hidden = true;
    line.appendChild(cancel);
    [["query-download query-csv", query.csv_url, "CSV"],
     ["query-download query-parquet", query.parquet_url, "Parquet"],
     ["query-link muted", query.page_url, "query " + query.id]].forEach(function (link) {
      var a = element("a", link[0], link[2]);
      a.href = link[1];
      a.hidden = link[0].indexOf("query-download") === 0;
      line.appendChild(document.createTextNode(" "));
      line.appendChild(a);
    });
    block.appendChild(line);
    var message = element("p", "query-error errorlist nonfield");
    message.hidden = true;
    block.appendChild(message);
    var scroll = element("div", "scroll query-scroll");
    var table = element("table", "list small query-grid");
    table.appendChild(element("thead"));
    table.appendChild(element("tbody"));
    scroll.appendChild(table);
    block.appendChild(scroll);
    var more = element("button", "query-more", "More rows");
    more.type = "button";
    more.hidden = true;
    block.appendChild(more);
    watch(block);
    return block;
  }

  window.lakeviewQueryGrid = grid;
  Array.prototype.forEach.call(document.querySelectorAll(".query-result[data-rows-url]"), watch);
})();
