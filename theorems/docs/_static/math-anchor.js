/* transformer-theorems: keep a linked claim in view once MathJax has typeset the page.
 *
 * The browser scrolls to #claim-id before MathJax (loaded asynchronously) replaces the TeX
 * above it, which changes the heights and leaves the reader somewhere else. When MathJax is
 * done, scroll to the target again if it has drifted out of place.
 */
(function () {
  "use strict";
  window.addEventListener("load", function () {
    var mathjax = window.MathJax;
    if (!window.location.hash || !mathjax || !mathjax.startup || !mathjax.startup.promise) {
      return;
    }
    var target = document.getElementById(decodeURIComponent(window.location.hash.slice(1)));
    mathjax.startup.promise.then(function () {
      if (target && Math.abs(target.getBoundingClientRect().top) > 40) {
        target.scrollIntoView();
      }
    });
  });
}());
