/* A materialized table's charts: refresh durations, lag over time (with the freshness
   as a horizontal line) and the rows violating each expectation per run, drawn by uPlot from the points fetched once the page has loaded
   (#charts[data-charts], refresh.pages.views.mt_charts). A series with fewer than two
   moments is shown as its value (charts.js). */
(function () {
  "use strict";
  var section = document.getElementById("charts");
  if (!section || !section.getAttribute("data-charts") || !document.getElementById("chart-durations")
      || typeof uPlot === "undefined" || typeof LakeviewCharts === "undefined") {
    return;
  }
  var shared = LakeviewCharts;
  fetch(section.getAttribute("data-charts"), {
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  })
    .then(function (response) {
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      return response.json();
    })
    .then(drawAll)
    .catch(function () {
      var note = document.createElement("p");
      note.className = "muted";
      note.id = "charts-failed";
      note.textContent = "The charts could not be loaded: reload the page to try again.";
      section.appendChild(note);
    });

  function drawAll(data) {
    function seconds(iso) { return Date.parse(iso) / 1000; }

    function draw(element, series, columns) {
      if (!element || !columns[0].length) { return null; }
      var options = {
        width: shared.width(element),
        height: 220,
        series: series,
        axes: [{}, { size: 60 }],
        scales: { x: { time: true } },
      };
      return new uPlot(options, columns, element);
    }

    var charts = [];
    var durations = data.durations || [];
    var durationsBox = document.getElementById("chart-durations");
    var durationTimes = durations.map(function (p) { return seconds(p.t); });
    if (durationsBox && durations.length && shared.moments(durationTimes) < 2) {
      var run = durations[durations.length - 1];
      var what = [run.action, String(run.state || "").toLowerCase()].filter(Boolean).join(", ");
      shared.showValues(durationsBox, [{ label: "duration", value: shared.number(run.seconds, "s") }],
        "At " + shared.when(durationTimes[durationTimes.length - 1]) + (what ? " (" + what + ")" : "")
        + ". The chart starts with the second refresh.");
    } else {
      charts.push(draw(
        durationsBox,
        [
          {},
          {
            label: "duration (s)",
            stroke: "#1769aa",
            width: 1.5,
            points: { show: true, size: 6 },
          },
        ],
        [durationTimes, durations.map(function (p) { return p.seconds; })]
      ));
    }

    var lag = data.lag || [];
    var freshness = data.freshness_seconds;
    var lagBox = document.getElementById("chart-lag");
    var lagTimes = lag.map(function (p) { return seconds(p.t); });
    if (lagBox && lag.length && shared.moments(lagTimes) < 2) {
      shared.showValues(lagBox, [
        { label: "lag", value: shared.number(lag[lag.length - 1].lag, "s") },
        { label: "freshness", value: shared.number(freshness, "s") },
      ], "Just after the refresh at " + shared.when(lagTimes[lagTimes.length - 1])
        + ". The chart starts with the second refresh.");
    } else {
      charts.push(draw(
        lagBox,
        [
          {},
          { label: "lag (s)", stroke: "#b42318", width: 1.5 },
          { label: "freshness (s)", stroke: "#17663a", width: 1, dash: [6, 4], points: { show: false } },
        ],
        [lagTimes, lag.map(function (p) { return p.lag; }), lag.map(function () { return freshness; })]
      ));
    }

    var expected = data.expectations || { names: [], points: [] };
    var expectationsBox = document.getElementById("chart-expectations");
    var expectationTimes = expected.points.map(function (p) { return seconds(p.t); });
    var colours = ["#6941c6", "#b54708", "#0e7090", "#c11574", "#3b7c0f", "#475467"];
    if (expectationsBox && expected.points.length && shared.moments(expectationTimes) < 2) {
      var last = expected.points[expected.points.length - 1];
      shared.showValues(expectationsBox, expected.names.map(function (name) {
        return { label: name, value: shared.number(last.counts[name] || 0, "rows") };
      }), "At " + shared.when(expectationTimes[expectationTimes.length - 1])
        + ". The chart starts with the second refresh that counted them.");
    } else if (expectationsBox && expected.points.length) {
      charts.push(draw(
        expectationsBox,
        [{}].concat(expected.names.map(function (name, index) {
          return {
            label: name + " (rows)",
            stroke: colours[index % colours.length],
            width: 1.5,
            points: { show: true, size: 5 },
          };
        })),
        [expectationTimes].concat(expected.names.map(function (name) {
          return expected.points.map(function (p) {
            return name in p.counts ? p.counts[name] : null;
          });
        }))
      ));
    }

    window.addEventListener("resize", function () {
      charts.forEach(function (chart) {
        if (chart) { chart.setSize({ width: shared.width(chart.root.parentNode), height: 220 }); }
      });
    });
  }
})();
