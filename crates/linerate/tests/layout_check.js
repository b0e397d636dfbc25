// Appended by tests/chart_layout.rs to a report page it generated, then run by headless
// Chromium (--dump-dom): measures every chart's text as the browser laid it out and writes
// what it found into a pre element (id layout-check) as JSON. It reads the page only; it fetches nothing.
(function () {
  "use strict";
  var out = { charts: [], problems: [] };
  var page = document.body.getBoundingClientRect();
  var SLACK = 0.5; // px a box may touch another or the edge (anti-aliasing, rounding)
  function overlap(a, b) {
    var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    return w > SLACK && h > SLACK;
  }
  function inside(a, b) {
    return a.left >= b.left - SLACK && a.right <= b.right + SLACK &&
      a.top >= b.top - SLACK && a.bottom <= b.bottom + SLACK;
  }
  var svgs = Array.prototype.slice.call(document.querySelectorAll("figure svg"));
  svgs.forEach(function (svg, i) {
    var fig = svg.closest("figure");
    var cap = fig && fig.querySelector("figcaption");
    var name = (cap ? cap.textContent : "chart " + i).trim().replace(/\s+/g, " ").slice(0, 90);
    var problem = function (what) { out.problems.push(name + ": " + what); };
    var box = svg.getBoundingClientRect();
    var vb = svg.viewBox && svg.viewBox.baseVal;
    var scale = vb && vb.width ? box.width / vb.width : 1;
    if (box.width < 0.9 * page.width) {
      problem("the chart is " + Math.round(box.width) + " px wide on a " +
        Math.round(page.width) + " px page");
    }
    if (box.right > window.innerWidth + SLACK) problem("the chart runs off the page");
    var texts = Array.prototype.slice.call(svg.querySelectorAll("text"))
      .filter(function (t) { return t.textContent.trim() !== ""; })
      .map(function (t) {
        return {
          t: t.textContent.trim().slice(0, 60),
          r: t.getBoundingClientRect(),
          px: parseFloat(getComputedStyle(t).fontSize) * scale,
        };
      });
    var plots = Array.prototype.slice.call(svg.querySelectorAll(".plot"))
      .map(function (p) { return p.getBoundingClientRect(); });
    var small = texts.filter(function (a) { return a.px < 12 - 0.01; });
    if (small.length) {
      var least = Math.min.apply(null, small.map(function (a) { return a.px; }));
      problem(small.length + " of " + texts.length + " texts are under 12 px (the smallest " +
        least.toFixed(1) + " px, e.g. " + JSON.stringify(small[0].t) + ")");
    }
    texts.forEach(function (a, k) {
      if (!inside(a.r, box)) problem(JSON.stringify(a.t) + " is clipped by the chart's edge");
      plots.forEach(function (p) {
        if (overlap(a.r, p)) problem(JSON.stringify(a.t) + " lies on the plotted data");
      });
      for (var j = k + 1; j < texts.length; j++) {
        if (overlap(a.r, texts[j].r)) {
          problem(JSON.stringify(a.t) + " overlaps " + JSON.stringify(texts[j].t));
        }
      }
    });
    var marks = Array.prototype.slice.call(svg.querySelectorAll(".mark"));
    var bare = marks.filter(function (m) { return !m.querySelector("title"); });
    if (marks.length === 0) problem("no plotted value carries its exact figure on hover");
    if (bare.length) problem(bare.length + " plotted values without their figure on hover");
    out.charts.push({
      name: name,
      kind: fig ? fig.getAttribute("data-kind") : null,
      texts: texts.length,
      marks: marks.length,
      height: Math.ceil(fig ? fig.getBoundingClientRect().height : box.height),
    });
  });
  var pre = document.createElement("pre");
  pre.id = "layout-check";
  // <, > and & escaped so the dumped DOM holds the JSON verbatim.
  pre.textContent = JSON.stringify(out).replace(/[<>&]/g, function (c) {
    return "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0");
  });
  document.body.appendChild(pre);
})();
