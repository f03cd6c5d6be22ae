// Sparklines for the status page: inline SVG built in the page, nothing
// loaded from elsewhere. window.kmirrorSpark(values, opts) returns an
// <svg> of the values (numbers; null breaks the line: an unknown lag is
// not 0).
"use strict";
(function () {
  // The SVG namespace, from an <svg> the HTML parser made (index.html's
  // template), rather than written out here.
  const NS = document.getElementById("svg-ns").content.firstElementChild.namespaceURI;
  const W = 160, H = 32, PAD = 2;

  function svgEl(tag, attrs) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    return e;
  }

  // spark draws values left (oldest) to right (newest), scaled from 0 to
  // their maximum; opts.label names it for screen readers and the tooltip.
  window.kmirrorSpark = function (values, opts) {
    const o = opts || {};
    const svg = svgEl("svg", { class: "spark", width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": o.label || "" });
    if (o.label) {
      const title = svgEl("title", {});
      title.textContent = o.label;
      svg.append(title);
    }
    const known = values.filter((v) => typeof v === "number");
    svg.dataset.points = String(values.length);
    if (known.length === 0) return svg;
    const top = Math.max(...known) || 1;
    const x = (i) => (values.length === 1 ? W - PAD : PAD + (i * (W - 2 * PAD)) / (values.length - 1));
    const y = (v) => H - PAD - (v / top) * (H - 2 * PAD);
    let seg = [];
    const flush = () => {
      if (seg.length === 1) svg.append(svgEl("circle", { cx: seg[0][0], cy: seg[0][1], r: 1.5, class: "spark-dot" }));
      if (seg.length > 1) svg.append(svgEl("polyline", { points: seg.map((p) => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" "), class: "spark-line" }));
      seg = [];
    };
    values.forEach((v, i) => {
      if (typeof v === "number") seg.push([x(i), y(v)]);
      else flush();
    });
    flush();
    return svg;
  };
})();
