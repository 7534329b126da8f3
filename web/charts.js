"use strict";
// Charts for Burst's dashboard, on uPlot (web/node_modules, compiled into
// the binary). One call draws or updates a chart in a container; the
// container says what it shows in data-points (the points drawn, over all
// series) and data-series, which the page tests read.

const Palette = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f"];

// container: an element. spec: {x: [...], series: [{label, values, color,
// dash, points, stepped, bars}], xLabel, yLabel, time (x in unix seconds),
// xPad (room left and right of the data, in x units: bars need it),
// yFromZero, yFormat (a tick's label from its value)}.
function drawChart(container, spec) {
  let points = 0;
  for (const s of spec.series) for (const v of s.values) if (v !== null && v !== undefined) points++;
  container.dataset.points = String(points);
  container.dataset.series = String(spec.series.length);
  if (typeof uPlot === "undefined") {
    container.textContent = "Charts are not in this build (scripts/install-npm-deps.sh web, then rebuild).";
    return;
  }
  if (!spec.x.length) {
    if (container._plot) { container._plot.destroy(); container._plot = null; }
    if (!container.querySelector(".empty")) {
      container.replaceChildren(Object.assign(document.createElement("div"), {className: "empty", textContent: spec.empty || "No points yet."}));
    }
    return;
  }
  const data = [spec.x, ...spec.series.map((s) => s.values)];
  container._x = spec.x;
  const shape = spec.series.map((s) => s.label).join("\u0000") + (spec.time ? "|t" : "");
  const width = innerWidth(container);
  if (container._plot && container._shape === shape) {
    container._plot.setData(data);
    return;
  }
  if (container._plot) container._plot.destroy();
  container.replaceChildren();
  const opts = {
    width,
    height: spec.height || 280,
    scales: {
      // From the data itself: uPlot widens a time scale with one point to
      // a thousand days.
      x: {time: !!spec.time, range: spec.xPad ? () => {
        const x = container._x;
        return [x[0] - spec.xPad, x[x.length - 1] + spec.xPad];
      } : undefined},
      y: spec.yFromZero ? {range: (u, min, max) => [0, max > 0 ? max * 1.15 : 1]} : {},
    },
    axes: [{label: spec.xLabel || ""}, {label: spec.yLabel || "", size: 60,
      values: spec.yFormat ? (u, ticks) => ticks.map(spec.yFormat) : undefined}],
    legend: {live: true},
    series: [{label: spec.xLabel || "x"}].concat(spec.series.map((s, i) => {
      const color = s.color || Palette[i % Palette.length];
      const out = {label: s.label, stroke: color, width: 2, spanGaps: true, points: {show: !!s.points, size: 6, fill: color}};
      if (s.dash) out.dash = s.dash;
      if (s.stepped) out.paths = uPlot.paths.stepped({align: 1});
      if (s.bars) { out.paths = uPlot.paths.bars({size: [0.6, 60]}); out.fill = color + "99"; }
      return out;
    })),
  };
  container._plot = new uPlot(opts, data, container);
  container._shape = shape;
  // The chart follows the window's width.
  if (!container._resize && typeof ResizeObserver !== "undefined") {
    container._resize = new ResizeObserver(() => {
      const w = innerWidth(container);
      if (container._plot && Math.abs(container._plot.width - w) > 4) container._plot.setSize({width: w, height: container._plot.height});
    });
    container._resize.observe(container);
  }
}

function innerWidth(container) {
  const style = getComputedStyle(container);
  const inner = container.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return Math.max(320, inner || 800);
}

// Rows of [x, {key: value}] merged onto one sorted x axis: the values of
// each key, null where a row lacks it.
function alignSeries(rows, keys) {
  const byX = new Map();
  for (const [x, vals] of rows) {
    const at = byX.get(x) || {};
    Object.assign(at, vals);
    byX.set(x, at);
  }
  const xs = [...byX.keys()].sort((a, b) => a - b);
  return {x: xs, values: keys.map((k) => xs.map((x) => (byX.get(x)[k] ?? null)))};
}

// How many pixels of a chart's canvas carry a series' colour ("#rrggbb";
// the first series' when not given): the tests ask this of the page, so a
// chart that draws only its axes and grid fails them.
function chartInk(container, color) {
  const canvas = container.querySelector("canvas");
  if (!canvas) return 0;
  const hex = color || Palette[0];
  const want = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  const px = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let ink = 0;
  for (let i = 0; i < px.length; i += 4) {
    if (px[i + 3] > 200 && Math.abs(px[i] - want[0]) < 24 && Math.abs(px[i + 1] - want[1]) < 24 &&
        Math.abs(px[i + 2] - want[2]) < 24) ink++;
  }
  return ink;
}
