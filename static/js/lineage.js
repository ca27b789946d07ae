/* The lineage graph: what an object reads (left) and what reads it (right), drawn as SVG
   from the JSON the page embeds (#lineage-data: {focus, nodes, edges}).

   Layout: layered, left to right. A node's column is the longest path to it from a root
   (a node nothing in the graph feeds); within a column, nodes are ordered by the mean
   position of their neighbours (a few sweeps), which keeps edges from crossing in the
   usual small graphs. Nodes are g.lineage-node[data-node="ns.name"] (a box with the name,
   the kind, and for materialized tables a state badge and the lag), each a link to its
   page; edges are path.lineage-edge with an arrowhead. */
(function () {
  "use strict";
  var source = document.getElementById("lineage-data");
  var svg = document.getElementById("lineage-graph");
  if (!source || !svg) { return; }
  var data = JSON.parse(source.textContent);
  var nodes = data.nodes || [];
  var edges = data.edges || [];
  var NS = "http://www.w3.org/2000/svg";
  var WIDTH = 216, GAP_X = 64, GAP_Y = 22, PAD = 24;
  var HEIGHT = { plain: 52, mt: 94 };

  function el(name, attrs, parent) {
    var node = document.createElementNS(NS, name);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }

  function text(parent, value, attrs) {
    var node = el("text", attrs, parent);
    node.textContent = value;
    return node;
  }

  function fit(node, value, width) {
    // Shorten a label with an ellipsis until it fits (the full name is in the title).
    node.textContent = value;
    if (typeof node.getComputedTextLength !== "function") { return; }
    var shown = value;
    while (shown.length > 1 && node.getComputedTextLength() > width) {
      shown = shown.slice(0, -1);
      node.textContent = shown + "\u2026";
    }
  }

  function lagText(seconds) {
    var s = Math.round(seconds);
    var d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
    var m = Math.floor((s % 3600) / 60), r = s % 60;
    if (d) { return d + " d " + h + " h"; }
    if (h) { return h + " h " + m + " min"; }
    if (m) { return m + " min " + r + " s"; }
    return r + " s";
  }

  var byId = {};
  nodes.forEach(function (node) {
    byId[node.id] = node;
    node.preds = [];
    node.succs = [];
    node.layer = 0;
  });
  edges = edges.filter(function (edge) { return byId[edge.source] && byId[edge.target]; });
  edges.forEach(function (edge) {
    byId[edge.target].preds.push(byId[edge.source]);
    byId[edge.source].succs.push(byId[edge.target]);
  });

  // Columns: the longest path from a root (at most |nodes| rounds, so a cycle cannot loop).
  for (var round = 0; round < nodes.length; round += 1) {
    var changed = false;
    edges.forEach(function (edge) {
      var from = byId[edge.source], to = byId[edge.target];
      if (to.layer < from.layer + 1 && from.layer + 1 < nodes.length) {
        to.layer = from.layer + 1;
        changed = true;
      }
    });
    if (!changed) { break; }
  }
  var columns = [];
  nodes.forEach(function (node) {
    (columns[node.layer] = columns[node.layer] || []).push(node);
  });
  columns = columns.filter(Boolean);
  columns.forEach(function (column) {
    column.sort(function (a, b) { return a.id < b.id ? -1 : a.id > b.id ? 1 : 0; });
    column.forEach(function (node, index) { node.order = index; });
  });

  // Order within columns by the mean order of neighbours, sweeping both ways.
  function mean(list, fallback) {
    if (!list.length) { return fallback; }
    return list.reduce(function (sum, n) { return sum + n.order; }, 0) / list.length;
  }
  function sweep(column, neighbours) {
    column.forEach(function (node) { node.weight = mean(neighbours(node), node.order); });
    column.sort(function (a, b) { return a.weight - b.weight || (a.id < b.id ? -1 : 1); });
    column.forEach(function (node, index) { node.order = index; });
  }
  for (var pass = 0; pass < 4; pass += 1) {
    columns.forEach(function (column, i) {
      if (i > 0) { sweep(column, function (n) { return n.preds; }); }
    });
    columns.slice().reverse().forEach(function (column, i) {
      if (i > 0) { sweep(column, function (n) { return n.succs; }); }
    });
  }

  // Positions: each column stacked, centred vertically on the tallest.
  function heightOf(node) { return node.kind === "materialized table" ? HEIGHT.mt : HEIGHT.plain; }
  var tallest = 0;
  columns.forEach(function (column) {
    column.total = column.reduce(function (sum, n) { return sum + heightOf(n); }, 0) +
      GAP_Y * (column.length - 1);
    tallest = Math.max(tallest, column.total);
  });
  columns.forEach(function (column, i) {
    var y = PAD + (tallest - column.total) / 2;
    column.forEach(function (node) {
      node.x = PAD + i * (WIDTH + GAP_X);
      node.y = y;
      node.h = heightOf(node);
      y += node.h + GAP_Y;
    });
  });
  var width = PAD * 2 + columns.length * WIDTH + Math.max(columns.length - 1, 0) * GAP_X;
  var height = PAD * 2 + tallest;
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);

  var defs = el("defs", {}, svg);
  [["lineage-arrow", "arrow"], ["lineage-arrow-focus", "arrow focus"]].forEach(function (spec) {
    var marker = el("marker", {
      id: spec[0], viewBox: "0 0 10 10", refX: "9", refY: "5",
      markerWidth: "9", markerHeight: "9", markerUnits: "userSpaceOnUse",
      orient: "auto-start-reverse",
    }, defs);
    el("path", { d: "M 0 0 L 10 5 L 0 10 z", "class": "lineage-arrow " + spec[1] }, marker);
  });

  var edgeLayer = el("g", { "class": "lineage-edges" }, svg);
  var nodeLayer = el("g", { "class": "lineage-nodes" }, svg);

  edges.forEach(function (edge) {
    var from = byId[edge.source], to = byId[edge.target];
    var x1 = from.x + WIDTH, y1 = from.y + from.h / 2;
    var x2 = to.x - 2, y2 = to.y + to.h / 2;
    var bend = Math.max(Math.abs(x2 - x1) / 2, 40);
    var touchesFocus = from.focus || to.focus;
    var path = el("path", {
      "class": "lineage-edge" + (touchesFocus ? " focus-edge" : ""),
      d: "M " + x1 + " " + y1 + " C " + (x1 + bend) + " " + y1 + ", " + (x2 - bend) + " " +
        y2 + ", " + x2 + " " + y2,
      "marker-end": touchesFocus ? "url(#lineage-arrow-focus)" : "url(#lineage-arrow)",
      "data-source": edge.source,
      "data-target": edge.target,
    }, edgeLayer);
    el("title", {}, path).textContent = edge.source + " \u2192 " + edge.target;
  });

  var KIND_CLASS = { "table": "table", "view": "view", "materialized table": "mt", "unknown": "unknown" };
  nodes.forEach(function (node) {
    var group = el("g", {
      "class": "lineage-node kind-" + (KIND_CLASS[node.kind] || "unknown") +
        (node.focus ? " focus" : "") + (node.late ? " late" : ""),
      "data-node": node.id,
      transform: "translate(" + node.x + "," + node.y + ")",
    }, nodeLayer);
    var holder = group;
    if (node.url) {
      holder = el("a", { href: node.url, "class": "lineage-link" }, group);
      holder.setAttributeNS("http://www.w3.org/1999/xlink", "xlink:href", node.url);
    }
    var title = el("title", {}, holder);
    title.textContent = node.id + " (" + node.kind + ")" + (node.freshness
      ? "\n" + node.state + ", " + node.refresh_mode + ", freshness " + node.freshness +
        (node.lag_seconds === null ? ", no data yet" : ", lag " + lagText(node.lag_seconds)) +
        (node.late ? " (late)" : "")
      : "");
    el("rect", { "class": "box", width: WIDTH, height: node.h, rx: 6, ry: 6 }, holder);
    el("rect", { "class": "stripe", width: 5, height: node.h, rx: 2, ry: 2 }, holder);
    fit(text(holder, "", { x: 14, y: 21, "class": "label" }), node.name, WIDTH - 24);
    fit(
      text(holder, "", { x: 14, y: 39, "class": "meta" }),
      node.namespace + " \u00b7 " + node.kind,
      WIDTH - 24
    );
    if (node.more_readers) {
      // The readers not drawn (at most the page's fanout are): a count and their list.
      var more = el("a", { href: node.readers_url, "class": "lineage-more" }, group);
      more.setAttributeNS("http://www.w3.org/1999/xlink", "xlink:href", node.readers_url);
      text(
        more,
        "+ " + (node.more_readers_at_least ? "more than " : "") + node.more_readers + " more",
        { x: WIDTH, y: node.h + 15, "text-anchor": "end", "class": "meta" }
      );
    }
    if (node.kind === "materialized table") {
      var x = 14;
      var badges = [[node.state || "?", "state-badge state-" + String(node.state || "").toLowerCase()]];
      if (node.late) { badges.push(["late", "state-badge late"]); }
      badges.forEach(function (spec) {
        var badge = el("g", { "class": spec[1], transform: "translate(" + x + ",49)" }, holder);
        var rect = el("rect", { width: 60, height: 17, rx: 8.5, ry: 8.5 }, badge);
        var label = text(badge, spec[0], { x: 30, y: 12.5, "text-anchor": "middle" });
        var w = 60;
        if (typeof label.getComputedTextLength === "function") {
          w = Math.max(label.getComputedTextLength() + 14, 34);
          rect.setAttribute("width", w);
          label.setAttribute("x", w / 2);
        }
        x += w + 6;
      });
      var lag = node.lag_seconds === null || node.lag_seconds === undefined
        ? "lag: no data yet" : "lag " + lagText(node.lag_seconds);
      fit(text(holder, "", { x: 14, y: 83, "class": "lag" + (node.late ? " late" : "") }),
        lag, WIDTH - 24);
    }
    group.addEventListener("mouseenter", function () { highlight(node.id, true); });
    group.addEventListener("mouseleave", function () { highlight(node.id, false); });
  });

  function highlight(id, on) {
    Array.prototype.forEach.call(svg.querySelectorAll("path.lineage-edge"), function (path) {
      if (path.getAttribute("data-source") === id || path.getAttribute("data-target") === id) {
        path.classList.toggle("hover", on);
      }
    });
  }

  // Bring the focused node into view when the graph is wider than the page.
  var focus = nodes.filter(function (n) { return n.focus; })[0];
  var canvas = document.getElementById("lineage-canvas");
  if (focus && canvas && canvas.scrollWidth > canvas.clientWidth) {
    canvas.scrollLeft = Math.max(focus.x - canvas.clientWidth / 2 + WIDTH / 2, 0);
  }
})();
