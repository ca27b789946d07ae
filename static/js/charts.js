/* What the pages' uPlot charts share (mt_charts.js, health_charts.js, table_browse.js):
   a chart's width in its box, and the text a chart with fewer than two moments shows
   instead: uPlot gives a single moment a time axis years wide, which reads as nothing. */
(function () {
  "use strict";

  // The box's width, so that a chart fits a phone's card too; never below what uPlot
  // needs for two axes and a few points.
  function width(element) { return Math.max(element.clientWidth || 0, 200); }

  // How many different moments (x values) a series has.
  function moments(xs) {
    var seen = {};
    var count = 0;
    xs.forEach(function (x) {
      if (x !== null && x !== undefined && !seen[x]) { seen[x] = true; count += 1; }
    });
    return count;
  }

  function when(seconds) {
    var moment = new Date(seconds * 1000);
    if (isNaN(moment.getTime())) { return String(seconds); }
    return moment.toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }

  function number(value, unit) {
    if (value === null || value === undefined) { return "–"; }
    var text = Number(value).toLocaleString("en-US", { maximumFractionDigits: 1 });
    return unit ? text + " " + unit : text;
  }

  // The chart's box shows `items` ([{label, value}], values already formatted) as text,
  // then `sentence` (which says when: `when(seconds)`).
  function showValues(element, items, sentence) {
    element.classList.add("chart-value");
    element.textContent = "";
    var list = document.createElement("dl");
    items.forEach(function (item) {
      var term = document.createElement("dt");
      term.textContent = item.label;
      var value = document.createElement("dd");
      value.textContent = item.value;
      list.appendChild(term);
      list.appendChild(value);
    });
    element.appendChild(list);
    var note = document.createElement("p");
    note.className = "muted small";
    note.textContent = sentence;
    element.appendChild(note);
  }

  window.LakeviewCharts = { width: width, moments: moments, when: when, number: number,
                            showValues: showValues };
})();
