/* A table's health over time (maintenance section): data files and delete files, average
   file size, snapshots kept, and the current metadata file's size, drawn by uPlot from the
   samples the API gives once the page has loaded (GET data-health-url, the table's health,
   with the session's cookie). Samples taken for a maintenance run are drawn as dots: the
   runs are marked on every line. A single sample is shown as its values (charts.js). */
(function (drawSamples) {
  "use strict";
  // The section may arrive after the page (static/js/later.js): look again when it does.
  function load() {
    var box = document.getElementById("chart-health-files");
    if (!box || !box.dataset.healthUrl || box.dataset.asked || typeof uPlot === "undefined") {
      return;
    }
    box.dataset.asked = "1";
    fetch(box.dataset.healthUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (body) { if (body && body.series) { drawSamples(body.series); } });
  }
  load();
  document.addEventListener("lakeview:later", load);
})(function (samples) {
  "use strict";
  if (typeof LakeviewCharts === "undefined") { return; }
  var shared = LakeviewCharts;
  if (!samples.length) { return; }

  function seconds(iso) { return Date.parse(iso) / 1000; }
  function column(key) { return samples.map(function (s) { return s[key]; }); }
  function kib(bytes) { return bytes === null ? null : bytes / 1024; }
  var times = samples.map(function (s) { return seconds(s.at); });
  var filesBox = document.getElementById("chart-health-files");
  var metadataBox = document.getElementById("chart-health-metadata");

  if (shared.moments(times) < 2) {
    var last = samples[samples.length - 1];
    var note = "At " + shared.when(times[times.length - 1])
      + ". The chart starts with the second sample.";
    if (filesBox) {
      shared.showValues(filesBox, [
        { label: "data files", value: shared.number(last.data_files) },
        { label: "delete files", value: shared.number(last.delete_files) },
        { label: "average file", value: shared.number(kib(last.average_file_bytes), "KiB") },
      ], note);
    }
    if (metadataBox) {
      shared.showValues(metadataBox, [
        { label: "snapshots kept", value: shared.number(last.snapshots) },
        { label: "metadata file", value: shared.number(kib(last.metadata_bytes), "KiB") },
      ], note);
    }
    return;
  }

  var marked = samples.map(function (s) { return s.run !== null; });
  var points = {
    show: true,
    size: 7,
    filter: function (u, seriesIdx, show) {
      var shown = [];
      marked.forEach(function (m, i) { if (m) { shown.push(i); } });
      return shown;
    },
  };

  function draw(element, series, columns) {
    if (!element) { return null; }
    return new uPlot({
      width: shared.width(element),
      height: 200,
      series: series,
      axes: [{}, { size: 60, scale: "y" }, { side: 1, size: 70, scale: "y2", grid: { show: false } }],
      scales: { x: { time: true } },
    }, columns, element);
  }

  var charts = [
    draw(filesBox, [
      {},
      { label: "data files", stroke: "#1769aa", width: 1.5, scale: "y", points: points },
      { label: "delete files", stroke: "#b42318", width: 1, scale: "y", points: points },
      { label: "average file (KiB)", stroke: "#17663a", width: 1, scale: "y2", points: points },
    ], [times, column("data_files"), column("delete_files"),
        samples.map(function (s) { return kib(s.average_file_bytes); })]),
    draw(metadataBox, [
      {},
      { label: "snapshots kept", stroke: "#6941c6", width: 1.5, scale: "y", points: points },
      { label: "metadata file (KiB)", stroke: "#b54708", width: 1, scale: "y2", points: points },
    ], [times, column("snapshots"), samples.map(function (s) { return kib(s.metadata_bytes); })]),
  ];
  window.addEventListener("resize", function () {
    charts.forEach(function (chart) {
      if (chart) { chart.setSize({ width: shared.width(chart.root.parentNode), height: 200 }); }
    });
  });
});
