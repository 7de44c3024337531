/* transformer-theorems: focus the dependency graph on one claim, offline, without libraries.
 *
 * The graph page holds <div class="tt-focus" data-graph="tt-graph-data"> and a JSON script
 * (id tt-graph-data) listing every node: id, area, title, status, colour key, fill, ink, url,
 * depends_on. Choosing a claim and a direction (its transitive dependencies, or the claims
 * that depend on it) hides the full graph and draws the restricted one, laid out afresh:
 * each node's rank is its longest path from a root of the subgraph, ranks are rows, and long
 * rows wrap. The choice lives in the URL (?focus=<id>&direction=dependencies|dependents), so
 * a focused view can be linked; every claim's section links to its own.
 */
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";

  function closure(start, next) {
    var seen = {}, stack = [start];
    seen[start] = true;
    while (stack.length) {
      var node = stack.pop();
      (next[node] || []).forEach(function (other) {
        if (!seen[other]) { seen[other] = true; stack.push(other); }
      });
    }
    return seen;
  }

  function el(name, attrs, text) {
    var e = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function layout(nodes, byId) {
    // Longest-path ranks inside the subgraph (it is acyclic: the registry test forbids cycles).
    var rank = {}, ids = nodes.map(function (n) { return n.id; });
    function rankOf(id) {
      if (rank[id] !== undefined) { return rank[id]; }
      rank[id] = 0;
      var deps = byId[id].depends_on.filter(function (d) { return ids.indexOf(d) >= 0; });
      rank[id] = deps.length ? 1 + Math.max.apply(null, deps.map(rankOf)) : 0;
      return rank[id];
    }
    ids.forEach(rankOf);
    return rank;
  }

  function draw(nodes, byId) {
    var rank = layout(nodes, byId), perRow = 4, w = 230, h = 26, gx = 18, gy = 26, pad = 12;
    var rows = {}, pos = {}, row = 0;
    nodes.forEach(function (n) { (rows[rank[n.id]] = rows[rank[n.id]] || []).push(n); });
    Object.keys(rows).map(Number).sort(function (a, b) { return a - b; }).forEach(function (r) {
      var members = rows[r].sort(function (a, b) { return a.id < b.id ? -1 : 1; });
      for (var start = 0; start < members.length; start += perRow) {
        members.slice(start, start + perRow).forEach(function (n, column) {
          pos[n.id] = [pad + column * (w + gx), pad + row * (h + gy)];
        });
        row += 1;
      }
    });
    var width = pad * 2 + perRow * w + (perRow - 1) * gx, height = pad * 2 + row * (h + gy);
    var svg = el("svg", {"class": "tt-graph tt-graph-focused", viewBox: "0 0 " + width + " " +
                         height, style: "max-width: " + width + "px; width: 100%; height: auto",
                         "font-family": "Helvetica, Arial, sans-serif", "font-size": "11"});
    var defs = el("defs", {}), marker = el("marker", {id: "tt-focus-arrow",
      viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "6", markerHeight: "6",
      orient: "auto-start-reverse"});
    marker.appendChild(el("path", {d: "M 0 0 L 10 5 L 0 10 z", fill: "#78909c"}));
    defs.appendChild(marker);
    svg.appendChild(defs);
    nodes.forEach(function (n) {
      n.depends_on.forEach(function (d) {
        if (!pos[d]) { return; }
        var a = pos[d], b = pos[n.id];
        svg.appendChild(el("path", {d: "M " + (a[0] + w / 2) + " " + (a[1] + h) + " C " +
          (a[0] + w / 2) + " " + (a[1] + h + gy) + ", " + (b[0] + w / 2) + " " + (b[1] - gy) +
          ", " + (b[0] + w / 2) + " " + b[1], fill: "none", stroke: "#78909c",
          "marker-end": "url(#tt-focus-arrow)"}));
      });
    });
    nodes.forEach(function (n) {
      var p = pos[n.id], link = el("a", {href: n.url, target: "_top"});
      link.appendChild(el("title", {}, n.tooltip || (n.id + " (" + n.colour + "): " + n.title)));
      link.appendChild(el("rect", {x: p[0], y: p[1], width: w, height: h, rx: 6,
                                   fill: n.fill, stroke: n.ink}));
      if (n.proved) {  // a machine-checked proof: a second, inner border
        link.appendChild(el("rect", {x: p[0] + 3, y: p[1] + 3, width: w - 6, height: h - 6,
                                     rx: 4, fill: "none", stroke: n.ink, "class": "tt-proved"}));
      }
      link.appendChild(el("text", {x: p[0] + w / 2, y: p[1] + h / 2 + 4,
                                   "text-anchor": "middle", fill: n.ink},
                          n.id.length <= 38 ? n.id : n.id.slice(0, 37) + "…"));
      svg.appendChild(link);
    });
    return svg;
  }

  function setup(holder) {
    var nodes = JSON.parse(document.getElementById(holder.dataset.graph).textContent);
    var byId = {}, deps = {}, users = {};
    nodes.forEach(function (n) { byId[n.id] = n; deps[n.id] = n.depends_on; users[n.id] = []; });
    nodes.forEach(function (n) {
      n.depends_on.forEach(function (d) { if (users[d]) { users[d].push(n.id); } });
    });
    var full = document.querySelector(".tt-graph-wrapper");
    var focused = document.createElement("div");
    focused.className = "tt-graph-focus-view";
    full.parentNode.insertBefore(focused, full.nextSibling);

    var list = document.createElement("datalist");
    list.id = "tt-focus-claims";
    nodes.forEach(function (n) {
      var o = document.createElement("option"); o.value = n.id; list.appendChild(o);
    });
    var input = document.createElement("input");
    input.type = "search"; input.name = "focus"; input.placeholder = "focus on a claim id";
    input.setAttribute("list", list.id);
    var direction = document.createElement("select");
    direction.name = "direction";
    [["dependencies", "and what it depends on"], ["dependents", "and what depends on it"]]
      .forEach(function (pair) {
        var o = document.createElement("option"); o.value = pair[0]; o.textContent = pair[1];
        direction.appendChild(o);
      });
    var clear = document.createElement("button");
    clear.type = "button"; clear.textContent = "whole graph";
    var note = document.createElement("span");
    note.className = "tt-count";
    [input, list, direction, clear, note].forEach(function (e) { holder.appendChild(e); });

    function apply(push) {
      var id = input.value.trim(), params = new URLSearchParams(window.location.search);
      focused.textContent = "";
      if (!byId[id]) {
        full.style.display = "";
        note.textContent = id ? "no claim " + id : nodes.length + " claims";
        params.delete("focus"); params.delete("direction");
      } else {
        var seen = closure(id, direction.value === "dependents" ? users : deps);
        var shown = nodes.filter(function (n) { return seen[n.id]; });
        full.style.display = "none";
        focused.appendChild(draw(shown, byId));
        note.textContent = shown.length + " of " + nodes.length + " claims: " + id + " " +
          direction.options[direction.selectedIndex].textContent;
        params.set("focus", id); params.set("direction", direction.value);
      }
      if (push) {
        var query = params.toString();
        window.history.replaceState(null, "", window.location.pathname +
                                    (query ? "?" + query : "") + window.location.hash);
      }
    }

    var initial = new URLSearchParams(window.location.search);
    input.value = initial.get("focus") || "";
    direction.value = initial.get("direction") === "dependents" ? "dependents" : "dependencies";
    input.addEventListener("change", function () { apply(true); });
    direction.addEventListener("change", function () { apply(true); });
    clear.addEventListener("click", function () { input.value = ""; apply(true); });
    apply(false);
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll(".tt-focus[data-graph]"), setup);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
