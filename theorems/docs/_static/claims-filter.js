/* transformer-theorems: filter and sort the table of claims, offline, without libraries.
 *
 * The index holds <div class="tt-filter" data-table="tt-claims"> above a table with class
 * tt-claims. This script builds a search box and one drop-down per categorical column
 * (status, area, tiers, tags) from the table's own cells, hides the rows that do not match,
 * and keeps the choice in the URL (?q=...&status=refuted) so a filtered view can be linked.
 * Clicking a column header sorts by it.
 */
(function () {
  "use strict";

  var FACETS = ["status", "area", "tiers", "tags"];  // header names of categorical columns

  function cellValues(cell) {
    // Chips (status, tiers, tags) are separate values; otherwise the cell's text is one.
    var chips = cell.querySelectorAll(".tt-chip");
    if (chips.length) {
      return Array.prototype.map.call(chips, function (c) { return c.textContent.trim(); });
    }
    var t = cell.textContent.trim();
    return t && t !== "—" ? [t] : [];
  }

  function sortKey(text) {
    var match = text.match(/-?\d+(\.\d+)?(e[-+]?\d+)?/i);
    return match && /^(margin|ratio|[-\d])/i.test(text) ? parseFloat(match[0]) : text.toLowerCase();
  }

  function setup(holder) {
    var table = document.querySelector("table." + holder.dataset.table);
    if (!table) { return; }
    var headers = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) {
      return th.textContent.trim().toLowerCase();
    });
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (tr) {
      var facets = {};
      FACETS.forEach(function (name) {
        var i = headers.indexOf(name);
        facets[name] = i < 0 ? [] : cellValues(tr.cells[i]);
      });
      return { tr: tr, text: tr.textContent.toLowerCase(), facets: facets };
    });

    var search = document.createElement("input");
    search.type = "search";
    search.placeholder = "Filter claims: id, title, area…";
    search.setAttribute("aria-label", "Filter claims");
    search.className = "tt-search";
    holder.appendChild(search);

    var selects = {};
    FACETS.forEach(function (name) {
      if (headers.indexOf(name) < 0) { return; }
      var values = {};
      rows.forEach(function (r) { r.facets[name].forEach(function (v) { values[v] = true; }); });
      var select = document.createElement("select");
      select.name = name;
      select.setAttribute("aria-label", "Filter by " + name);
      select.appendChild(new Option("any " + name.replace(/s$/, ""), ""));
      Object.keys(values).sort().forEach(function (v) { select.appendChild(new Option(v, v)); });
      holder.appendChild(select);
      selects[name] = select;
    });

    var reset = document.createElement("button");
    reset.type = "button";
    reset.textContent = "Clear";
    holder.appendChild(reset);
    var count = document.createElement("span");
    count.className = "tt-count";
    count.setAttribute("aria-live", "polite");
    holder.appendChild(count);

    function apply(updateUrl) {
      var words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0;
      rows.forEach(function (r) {
        var ok = words.every(function (w) { return r.text.indexOf(w) >= 0; });
        Object.keys(selects).forEach(function (name) {
          var want = selects[name].value;
          if (want && r.facets[name].indexOf(want) < 0) { ok = false; }
        });
        r.tr.classList.toggle("tt-hidden", !ok);
        if (ok) { shown += 1; }
      });
      count.textContent = shown + " of " + rows.length + " claims";
      if (updateUrl && window.history && window.history.replaceState) {
        var params = new URLSearchParams(window.location.search);
        params.delete("q");
        if (search.value) { params.set("q", search.value); }
        Object.keys(selects).forEach(function (name) {
          params.delete(name);
          if (selects[name].value) { params.set(name, selects[name].value); }
        });
        var query = params.toString();
        window.history.replaceState(null, "", window.location.pathname + (query ? "?" + query : "") + window.location.hash);
      }
    }

    var params = new URLSearchParams(window.location.search);
    search.value = params.get("q") || "";
    Object.keys(selects).forEach(function (name) {
      var v = params.get(name);
      if (v && Array.prototype.some.call(selects[name].options, function (o) { return o.value === v; })) {
        selects[name].value = v;
      }
    });
    search.addEventListener("input", function () { apply(true); });
    Object.keys(selects).forEach(function (name) {
      selects[name].addEventListener("change", function () { apply(true); });
    });
    reset.addEventListener("click", function () {
      search.value = "";
      Object.keys(selects).forEach(function (name) { selects[name].value = ""; });
      apply(true);
    });
    apply(false);

    // Sorting: click a header; a second click reverses.
    Array.prototype.forEach.call(table.querySelectorAll("thead th"), function (th, column) {
      th.setAttribute("title", "Sort by " + th.textContent.trim());
      th.addEventListener("click", function () {
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(table.querySelectorAll("thead th"), function (other) {
          other.removeAttribute("aria-sort");
        });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        rows.slice().sort(function (a, b) {
          var x = sortKey(a.tr.cells[column].textContent.trim());
          var y = sortKey(b.tr.cells[column].textContent.trim());
          if (typeof x !== typeof y) { x = String(x); y = String(y); }
          return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
        }).forEach(function (r) { body.appendChild(r.tr); });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll(".tt-filter[data-table]"), setup);
  });
}());
