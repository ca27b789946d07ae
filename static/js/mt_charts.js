/* A materialized table's charts: refresh durations and lag over time (with the freshness
   as a horizontal line), drawn by uPlot from the JSON the page embeds (#mt-chart-data). */
(function () {
  "use strict";
  var source = document.getElementById("mt-chart-data");
  if (!source || typeof uPlot === "undefined") { return; }
  var data = JSON.parse(source.textContent);

  function seconds(iso) { return Date.parse(iso) / 1000; }

  function width(element) { return Math.max(element.clientWidth || 0, 320); }

  function draw(element, series, columns) {
    if (!element || !columns[0].length) { return null; }
    var options = {
      width: width(element),
      height: 220,
      series: series,
      axes: [{}, { size: 60 }],
      scales: { x: { time: true } },
    };
    return new uPlot(options, columns, element);
  }

  var charts = [];
  var durations = data.durations || [];
  charts.push(draw(
    document.getElementById("chart-durations"),
    [
      {},
      {
        label: "duration (s)",
        stroke: "#1769aa",
        width: 1.5,
        points: { show: true, size: 6 },
      },
    ],
    [durations.map(function (p) { return seconds(p.t); }),
     durations.map(function (p) { return p.seconds; })]
  ));

  var lag = data.lag || [];
  var freshness = data.freshness_seconds;
  charts.push(draw(
    document.getElementById("chart-lag"),
    [
      {},
      { label: "lag (s)", stroke: "#b42318", width: 1.5 },
      { label: "freshness (s)", stroke: "#17663a", width: 1, dash: [6, 4], points: { show: false } },
    ],
    [lag.map(function (p) { return seconds(p.t); }),
     lag.map(function (p) { return p.lag; }),
     lag.map(function () { return freshness; })]
  ));

  window.addEventListener("resize", function () {
    charts.forEach(function (chart) {
      if (chart) { chart.setSize({ width: width(chart.root.parentNode), height: 220 }); }
    });
  });
})();
