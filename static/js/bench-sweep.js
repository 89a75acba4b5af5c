/* Sweep page: TPS against clients and latency against clients, one line per target (direct, each
 * pool) or, for a pool-size sweep, one line per pool size; each point is the median of its repeats
 * and the best cell (highest median TPS) is drawn larger, as a diamond.
 *
 * The element marked data-bench-sweep carries data-url (the sweep's results as JSON: "series", each
 * a label and points) and translated labels; it holds <canvas data-chart="tps|latency">. Results
 * are fetched every 2 s (paused while the tab is hidden) until every run of the sweep is over.
 */
(function () {
  "use strict";

  window.PanelLocale.chart(window.Chart);  // tick and tooltip numbers in the page's language

  var POLL_MS = 2000;
  var PALETTE = ["#0069ff", "#2e9e5b", "#d63b3b", "#f0a202", "#7b4fd6", "#1c2b41"];

  var bestLabel = "";

  function chart(canvas, xLabel, yLabel) {
    return new window.Chart(canvas, {
      type: "line",
      data: { datasets: [] },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: { type: "linear", title: { display: true, text: xLabel }, ticks: { precision: 0 } },
          y: { beginAtZero: true, title: { display: true, text: yLabel } },
        },
        plugins: {
          legend: { position: "bottom" },
          tooltip: {
            callbacks: {
              afterLabel: function (context) {
                return context.raw && context.raw.best ? bestLabel : "";
              },
            },
          },
        },
      },
    });
  }

  function isBest(context) {
    return Boolean(context.raw && context.raw.best);
  }

  function datasets(series, metric) {
    return series.map(function (line, i) {
      var color = PALETTE[i % PALETTE.length];
      return {
        label: line.label,
        data: line.points
          .filter(function (point) { return point[metric] !== null; })
          .map(function (point) { return { x: point.clients, y: point[metric], best: point.best }; }),
        borderColor: color,
        backgroundColor: color,
        borderWidth: 2,
        pointRadius: function (context) { return isBest(context) ? 9 : 4; },
        pointStyle: function (context) { return isBest(context) ? "rectRot" : "circle"; },
      };
    });
  }

  function watch(root) {
    var labels = root.dataset;
    bestLabel = labels.labelBest || "best";
    var tps = chart(root.querySelector("canvas[data-chart='tps']"), labels.labelClients, labels.labelTps);
    var latency = chart(root.querySelector("canvas[data-chart='latency']"), labels.labelClients, labels.labelMs);

    function poll() {
      window.PanelPoll.whenVisible(root, fetchResults);
    }

    function fetchResults() {
      window.PanelPoll.getJSON(root.dataset.url)
        .then(function (body) {
          tps.data.datasets = datasets(body.series, "tps");
          latency.data.datasets = datasets(body.series, "latency_avg_ms");
          tps.update("none");
          latency.update("none");
          if (body.done) {
            root.dataset.done = "true";
          } else {
            window.setTimeout(poll, POLL_MS);
          }
        })
        .catch(function () { window.setTimeout(poll, POLL_MS); });
    }
    poll();
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (window.Chart) {
      document.querySelectorAll("[data-bench-sweep]").forEach(watch);
    }
  });
})();
