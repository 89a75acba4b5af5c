/* Sweep page: TPS against clients and latency against clients, one line per target.
 *
 * The element marked data-bench-sweep carries data-url (the sweep's results as JSON) and
 * translated labels; it holds <canvas data-chart="tps|latency">. Results are fetched every 2 s
 * (paused while the tab is hidden) until every run of the sweep is over.
 */
(function () {
  "use strict";

  window.PanelLocale.chart(window.Chart);  // tick and tooltip numbers in the page's language

  var POLL_MS = 2000;
  var PALETTE = ["#0069ff", "#2e9e5b", "#d63b3b", "#f0a202", "#7b4fd6", "#1c2b41"];

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
        plugins: { legend: { position: "bottom" } },
      },
    });
  }

  function datasets(targets, metric) {
    return Object.keys(targets).map(function (target, i) {
      var color = PALETTE[i % PALETTE.length];
      return {
        label: target,
        data: targets[target]
          .filter(function (point) { return point[metric] !== null; })
          .map(function (point) { return { x: point.clients, y: point[metric] }; }),
        borderColor: color,
        backgroundColor: color,
        borderWidth: 2,
        pointRadius: 4,
      };
    });
  }

  function watch(root) {
    var labels = root.dataset;
    var tps = chart(root.querySelector("canvas[data-chart='tps']"), labels.labelClients, labels.labelTps);
    var latency = chart(root.querySelector("canvas[data-chart='latency']"), labels.labelClients, labels.labelMs);

    function poll() {
      window.PanelPoll.whenVisible(root, fetchResults);
    }

    function fetchResults() {
      window.PanelPoll.getJSON(root.dataset.url)
        .then(function (body) {
          tps.data.datasets = datasets(body.targets, "tps");
          latency.data.datasets = datasets(body.targets, "latency_avg_ms");
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
