/* A table's page: the snapshot timeline (rows and data files in the table after each
   snapshot, the operation as each point's label) drawn by uPlot from the JSON the page
   embeds (#snapshot-chart-data), and the preview form's column list following the schema
   of the snapshot or moment chosen (#schema-columns). The page works without it. */
(function () {
  "use strict";

  function json(id) {
    var element = document.getElementById(id);
    return element ? JSON.parse(element.textContent) : null;
  }

  var chartData = json("snapshot-chart-data") || { points: [] };
  var points = chartData.points || [];

  // -- the preview form's columns follow the chosen snapshot's schema ----------------------
  var schemaColumns = json("schema-columns") || {};
  var form = document.getElementById("preview-form");
  if (form) {
    var columns = form.querySelector("select[name=columns]");
    var snapshot = form.querySelector("select[name=snapshot_id]");
    var moment = form.querySelector("input[name=timestamp]");
    var currentSchema = form.getAttribute("data-current-schema");

    var schemaOf = function () {
      if (snapshot && snapshot.value) {
        for (var i = 0; i < points.length; i++) {
          if (points[i].id === snapshot.value) {
            return points[i].schema_id === null ? currentSchema : String(points[i].schema_id);
          }
        }
        return null; // not a snapshot the page knows: leave the list alone
      }
      if (moment && moment.value) {
        var asked = Date.parse(moment.value + "Z");
        var found = null;
        points.forEach(function (p) { if (p.t <= asked) { found = p; } });
        if (!found) { return null; }
        return found.schema_id === null ? currentSchema : String(found.schema_id);
      }
      return currentSchema;
    };

    var follow = function () {
      var schema = schemaOf();
      if (!columns || schema === null || !schemaColumns[schema]) { return; }
      var chosen = {};
      Array.prototype.forEach.call(columns.selectedOptions, function (o) { chosen[o.value] = true; });
      columns.innerHTML = "";
      schemaColumns[schema].forEach(function (name) {
        var option = document.createElement("option");
        option.value = name;
        option.textContent = name;
        option.selected = !!chosen[name];
        columns.appendChild(option);
      });
    };
    if (snapshot) { snapshot.addEventListener("change", follow); }
    if (moment) { moment.addEventListener("change", follow); }
  }

  // -- the snapshot timeline --------------------------------------------------------------
  var element = document.getElementById("snapshot-chart");
  if (!element || typeof uPlot === "undefined" || !points.length) { return; }
  if (typeof LakeviewCharts === "undefined") { return; }
  var shared = LakeviewCharts;
  var hasRecords = points.some(function (p) { return p.records !== null; });
  var hasFiles = points.some(function (p) { return p.files !== null; });
  if (!hasRecords && !hasFiles) {
    element.className = "muted small";
    element.textContent = "The writer recorded no totals in the snapshots' summaries, so there is nothing to chart.";
    return;
  }

  var xs = points.map(function (p) { return p.t / 1000; });
  var records = points.map(function (p) { return p.records; });
  var files = points.map(function (p) { return p.files; });
  var labelled = hasRecords ? records : files;
  var labelScale = hasRecords ? "rows" : "files";

  if (shared.moments(xs) < 2) {
    var last = points[points.length - 1];
    var values = [];
    if (hasRecords) { values.push({ label: "rows", value: shared.number(last.records) }); }
    if (hasFiles) { values.push({ label: "data files", value: shared.number(last.files) }); }
    shared.showValues(element, values, "Snapshot " + last.id + " (" + (last.op || "?") + ") at "
      + shared.when(xs[xs.length - 1]) + ". The chart starts with the second snapshot.");
    return;
  }

  function when(seconds) {
    var moment = new Date(seconds * 1000);
    if (isNaN(moment.getTime())) { return String(seconds * 1000) + " ms"; }
    return moment.toISOString().replace("T", " ").slice(0, 19);
  }

  function width() { return shared.width(element); }

  function drawLabels(u) {
    if (points.length > 60) { return; } // too many to read: the legend names each one
    var ctx = u.ctx;
    var ratio = window.devicePixelRatio || 1;
    ctx.save();
    ctx.font = (11 * ratio) + "px system-ui, sans-serif";
    ctx.fillStyle = "#39475a";
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    for (var i = 0; i < points.length; i++) {
      if (labelled[i] === null) { continue; }
      var x = u.valToPos(xs[i], "x", true);
      var y = u.valToPos(labelled[i], labelScale, true);
      ctx.fillText(points[i].op || "?", x, y - 6 * ratio);
    }
    ctx.restore();
  }

  var options = {
    width: width(),
    height: 240,
    padding: [24, 16, 0, 8],
    scales: { x: { time: true }, rows: { auto: true }, files: { auto: true } },
    series: [
      {
        label: "snapshot",
        value: function (u, v, s, idx) {
          if (idx === null || idx === undefined) { return "—"; }
          var p = points[idx];
          return when(v) + " · " + (p.op || "?") + " · " + p.id;
        },
      },
      {
        label: "rows",
        scale: "rows",
        stroke: "#1769aa",
        width: 1.5,
        points: { show: true, size: 7 },
        show: hasRecords,
      },
      {
        label: "data files",
        scale: "files",
        stroke: "#b26a00",
        width: 1,
        dash: [6, 4],
        points: { show: true, size: 5 },
        show: hasFiles,
      },
    ],
    axes: [
      {},
      { scale: "rows", size: 70, label: "rows" },
      { scale: "files", side: 1, size: 50, label: "data files", grid: { show: false } },
    ],
    hooks: { draw: [drawLabels] },
  };
  var chart = new uPlot(options, [xs, records, files], element);

  // A click on a snapshot previews the table as it was then.
  chart.over.style.cursor = "pointer";
  chart.over.addEventListener("click", function () {
    var idx = chart.cursor.idx;
    if (idx === null || idx === undefined) { return; }
    window.location.href = "?preview=1&snapshot_id=" + encodeURIComponent(points[idx].id) + "#preview";
  });
  window.addEventListener("resize", function () { chart.setSize({ width: width(), height: 240 }); });
})();
