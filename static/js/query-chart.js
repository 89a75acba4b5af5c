/* One statement's chart on its detail page (templates/insights/query_detail.html): calls per
 * collection (bars, left axis) and mean execution time (line, right axis) over the window.
 *
 * <canvas data-query-chart data-url="…" data-label-calls="…" data-label-mean="…">: the URL answers
 * {start, end, points: [{t, calls, mean_ms}]} (insights:query-data); t in ms since the epoch.
 */
(function () {
  "use strict";

  function draw(canvas, body) {
    var empty = canvas.parentElement.querySelector("[data-query-chart-empty]");
    if (!body.points.length && empty) empty.hidden = false;
    var x = window.PanelAxes.time({ min: body.start, max: body.end });
    x.min = body.start;
    x.max = body.end;
    return new window.Chart(canvas, {
      data: {
        datasets: [
          {
            type: "bar",
            label: canvas.dataset.labelCalls,
            yAxisID: "calls",
            maxBarThickness: 24,
            minBarLength: 2,
            data: body.points.map(function (p) { return { x: p.t, y: p.calls }; }),
          },
          {
            type: "line",
            label: canvas.dataset.labelMean,
            yAxisID: "mean",
            pointRadius: 2,
            data: body.points.map(function (p) { return { x: p.t, y: p.mean_ms }; }),
          },
        ],
      },
      options: {
        animation: false,
        maintainAspectRatio: false,
        parsing: false,
        scales: {
          x: x,
          calls: { type: "linear", position: "left", beginAtZero: true, title: { display: true, text: canvas.dataset.labelCalls } },
          mean: { type: "linear", position: "right", beginAtZero: true, grid: { drawOnChartArea: false }, title: { display: true, text: canvas.dataset.labelMean } },
        },
        plugins: {
          tooltip: {
            callbacks: {
              title: function (items) {
                return items.length ? window.PanelAxes.utcLabel(items[0].parsed.x) : "";
              },
            },
          },
        },
      },
    });
  }

  function start() {
    document.querySelectorAll("canvas[data-query-chart]").forEach(function (canvas) {
      window.PanelPoll.getJSON(canvas.dataset.url).then(function (body) {
        if (body) draw(canvas, body);
      });
    });
  }

  document.addEventListener("DOMContentLoaded", start);
})();
