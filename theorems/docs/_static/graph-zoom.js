/* transformer-theorems: zoom and pan the dependency graph, offline, without libraries.
 *
 * Every <svg class="tt-graph"> inside a .tt-graph-wrapper gets a fixed-height viewport and
 * three buttons (zoom in, zoom out, fit). The wheel zooms about the pointer, a drag pans; both
 * rewrite the SVG's viewBox, so the drawing stays sharp and its links keep working (a click
 * that ended a drag is swallowed, so panning never opens a claim).
 */
(function () {
  "use strict";

  var STEP = 1.25, MOST = 40;  // one wheel notch or button press; the deepest zoom, x40

  function zoomable(svg) {
    var box = svg.viewBox && svg.viewBox.baseVal;
    if (!box || !box.width || svg.dataset.ttZoom) { return; }
    svg.dataset.ttZoom = "on";
    var home = [box.x, box.y, box.width, box.height], view = home.slice();
    svg.classList.add("tt-zoomable");
    // a viewport of fixed height that the drawing fits into (the renderers size it to the
    // page width, which leaves 177 nodes a few pixels each)
    svg.style.maxWidth = "none";
    svg.style.width = "100%";
    svg.style.height = "75vh";

    function apply() { svg.setAttribute("viewBox", view.join(" ")); }
    function user(x, y, matrix) {  // a client point in the SVG's user units
      var p = svg.createSVGPoint();
      p.x = x; p.y = y;
      return p.matrixTransform((matrix || svg.getScreenCTM()).inverse());
    }
    function zoom(factor, x, y) {  // factor < 1 zooms in, about the client point (x, y)
      var width = Math.min(Math.max(view[2] * factor, home[2] / MOST), home[2] * 2);
      factor = width / view[2];
      var at = user(x, y);
      view = [at.x - (at.x - view[0]) * factor, at.y - (at.y - view[1]) * factor,
              view[2] * factor, view[3] * factor];
      apply();
    }
    function centre() {
      var r = svg.getBoundingClientRect();
      return [r.left + r.width / 2, r.top + r.height / 2];
    }

    function fitWidth() {  // the top of the graph at the viewport's width: labels readable
      var r = svg.getBoundingClientRect();
      var height = r.width ? home[2] * r.height / r.width : home[3];
      view = height < home[3] ? [home[0], home[1], home[2], height] : home.slice();
      apply();
    }

    var bar = document.createElement("div");
    bar.className = "tt-zoom";
    [["+", "zoom in", function () { var c = centre(); zoom(1 / STEP, c[0], c[1]); }],
     ["\u2212", "zoom out", function () { var c = centre(); zoom(STEP, c[0], c[1]); }],
     ["fit width", "fit the graph's width", fitWidth],
     ["fit all", "show the whole graph", function () { view = home.slice(); apply(); }]
    ].forEach(function (spec) {
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = spec[0];
      button.title = spec[1];
      button.setAttribute("aria-label", spec[1]);
      button.addEventListener("click", spec[2]);
      bar.appendChild(button);
    });
    var hint = document.createElement("span");
    hint.textContent = "scroll to zoom, drag to pan";
    bar.appendChild(hint);
    svg.parentNode.insertBefore(bar, svg);
    fitWidth();

    svg.addEventListener("wheel", function (event) {
      event.preventDefault();
      zoom(event.deltaY < 0 ? 1 / STEP : STEP, event.clientX, event.clientY);
    }, {passive: false});

    var drag = null, moved = false;
    svg.addEventListener("pointerdown", function (event) {
      if (event.button !== 0) { return; }
      var matrix = svg.getScreenCTM();
      drag = {matrix: matrix, start: user(event.clientX, event.clientY, matrix),
              view: view.slice(), x: event.clientX, y: event.clientY};
      moved = false;
    });
    svg.addEventListener("pointermove", function (event) {
      if (!drag) { return; }
      if (!moved && Math.abs(event.clientX - drag.x) + Math.abs(event.clientY - drag.y) < 4) {
        return;
      }
      if (!moved) { moved = true; svg.setPointerCapture(event.pointerId); }
      var now = user(event.clientX, event.clientY, drag.matrix);
      view = [drag.view[0] - (now.x - drag.start.x), drag.view[1] - (now.y - drag.start.y),
              view[2], view[3]];
      apply();
    });
    function end() { drag = null; }
    svg.addEventListener("pointerup", end);
    svg.addEventListener("pointercancel", end);
    svg.addEventListener("click", function (event) {
      if (moved) { event.preventDefault(); event.stopPropagation(); moved = false; }
    }, true);
  }

  function init() {
    document.querySelectorAll(".tt-graph-wrapper svg.tt-graph").forEach(zoomable);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
}());
