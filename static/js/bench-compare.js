/* Compare page: TPS and latency over time, one line per run, and a bar of TPS per run.
 *
 * The element marked data-bench-compare carries data-url (the comparison's JSON) and translated
 * labels (data-label-*); it holds <canvas data-chart="bars|tps|latency">. Finished runs do not
 * change, so the data is fetched once. Only runs with samples get a line (body.lines) and only
 * runs with a result get a bar (body.tps_bars): a run that failed has no legend entry, no zero bar;
 * the table above says why it has none. Colours follow the run's place in the table.
 */
(function () {
  "use strict";

  var PALETTE = ["#0069ff", "#2e9e5b", "#f0a202", "#7b4fd6", "#17a2b8", "#1c2b41", "#e05fa6", "#8a6d3b"];

  function lineOptions(xLabel, yLabel) {
    return {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      interaction: { mode: "nearest", intersect: false },
      scales: {
        x: window.PanelAxes.seconds({ title: { display: true, text: xLabel } }),
        y: { beginAtZero: true, title: { display: true, text: yLabel } },
      },
      plugins: { legend: { position: "bottom" } },
    };
  }

  function series(body, metric, run, index) {
    var values = body.series[metric][run.id] || [];
    var interval = body.interval_s[run.id] || 1;
    var points = [];
    for (var i = 0; i < body.x.length; i++) {
      if (values[i] !== null && values[i] !== undefined) {
        points.push({ x: body.x[i] * interval, y: values[i] });
      }
    }
    var color = PALETTE[index % PALETTE.length];
    return {
      label: run.label,
      data: points,
      borderColor: color,
      backgroundColor: color,
      borderWidth: 2,
      pointRadius: 0,
      tension: 0.2,
    };
  }

  function draw(root, body) {
    var labels = root.dataset;
    var index = {};
    body.runs.forEach(function (run, i) { index[run.id] = i; });
    var runs = body.runs.filter(function (run) { return body.lines.indexOf(run.id) !== -1; });
    var bars = body.tps_bars;
    var canvas = function (name) { return root.querySelector("canvas[data-chart='" + name + "']"); };
    new window.Chart(canvas("tps"), {
      type: "line",
      data: { datasets: runs.map(function (run) { return series(body, "tps", run, index[run.id]); }) },
      options: lineOptions(labels.labelSeconds, labels.labelTps),
    });
    new window.Chart(canvas("latency"), {
      type: "line",
      data: { datasets: runs.map(function (run) { return series(body, "latency_avg_ms", run, index[run.id]); }) },
      options: lineOptions(labels.labelSeconds, labels.labelMs),
    });
    new window.Chart(canvas("bars"), {
      type: "bar",
      data: {
        labels: bars.map(function (bar) { return bar.label; }),
        datasets: [{
          label: labels.labelTps,
          data: bars.map(function (bar) { return bar.tps; }),
          backgroundColor: bars.map(function (bar) { return PALETTE[index[bar.id] % PALETTE.length]; }),
        }],
      },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: { y: { beginAtZero: true, title: { display: true, text: labels.labelTps } } },
        plugins: { legend: { display: false } },
      },
    });
    root.dataset.drawn = "true";
  }

  function start() {
    if (!window.Chart) {
      return;
    }
    document.querySelectorAll("[data-bench-compare]").forEach(function (root) {
      fetch(root.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) { return response.json(); })
        .then(function (body) {
          if (!body.error) {
            draw(root, body);
          }
        });
    });
  }

  document.addEventListener("DOMContentLoaded", start);
})();
