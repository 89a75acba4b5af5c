/* Live charts of a benchmark run: TPS over time, and latency (average, p50, p95, p99).
 *
 * An element marked data-bench-run-charts carries data-url (the run's samples endpoint) and the
 * translated labels (data-label-*); it holds <canvas data-chart="tps"> and <canvas data-chart="latency">.
 * The script asks for the samples after the last one it has (?after=<seq>) every second while the
 * run is queued or running, appends them, and stops once the run is over. Percentiles reach the
 * database a little after their sample, so recent samples without them are asked for again.
 * The charts are Chart.js instances: Chart.getChart(canvas) returns them.
 *
 * This is the run page's only poll (watching a run must not cost the run its throughput): the
 * answer also carries the status card's figures, which are put in place here, and the state token
 * of the page's live part (#bench-run-live, data-state); only when the token differs from the one
 * shown is that part re-fetched (an event its hx-trigger listens for). The request sends the token
 * shown, and the server answers 204 when nothing changed. Nothing is asked while the tab is hidden.
 */
(function () {
  "use strict";

  var POLL_MS = 1000;
  // Redrawing both charts every second was most of what watching cost the run on a small machine
  // (issue 11, item 12): samples join the charts' data as they come, the canvases are drawn again
  // at most every REDRAW_MS, and at once for the first samples and when the run is over.
  var REDRAW_MS = 5000;
  var PERCENTILE_WINDOW = 120; // samples whose percentiles may still arrive
  var COLORS = { tps: "#0069ff", avg: "#1c2b41", p50: "#2e9e5b", p95: "#f0a202", p99: "#d63b3b" };

  function lineDataset(label, color) {
    return {
      label: label,
      data: [],
      borderColor: color,
      backgroundColor: color,
      borderWidth: 2,
      pointRadius: 0,
      pointHitRadius: 6,
      tension: 0, // straight segments: no curve to compute at every redraw
      spanGaps: false,
    };
  }

  // x: seconds since the run started, regular ticks from 0; a timed run's axis spans its duration
  // from the start, so the line fills the chart as the run goes (chart-axes.js).
  function options(xLabel, yLabel, duration) {
    return {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      interaction: { mode: "index", intersect: false },
      scales: {
        x: window.PanelAxes.seconds({ title: { display: true, text: xLabel }, max: duration }),
        y: { beginAtZero: true, title: { display: true, text: yLabel } },
      },
      plugins: { legend: { display: true, position: "bottom" } },
    };
  }

  function RunCharts(root) {
    var labels = root.dataset;
    var tpsCanvas = root.querySelector("canvas[data-chart='tps']");
    var latencyCanvas = root.querySelector("canvas[data-chart='latency']");
    var duration = Number(labels.duration) || undefined;
    this.root = root;
    this.url = root.dataset.url;
    this.tps = null;
    this.latency = null;
    this.index = {}; // seq -> position in every dataset
    this.seqs = [];
    this.pending = {}; // seqs whose percentiles have not arrived yet
    this.percentiles = false;
    this.terminalSeen = 0;
    this.drawnAt = 0; // when the canvases were last drawn (0: never)
    this.redrawTimer = null;
    root.benchCharts = this;
    if (!window.Chart || !window.PanelAxes) {
      return; // no charts (the script did not load): the figures and the status still follow the run
    }
    this.tps = new window.Chart(tpsCanvas, {
      type: "line",
      data: { datasets: [lineDataset(labels.labelTps, COLORS.tps)] },
      options: options(labels.labelSeconds, labels.labelTps, duration),
    });
    this.latency = new window.Chart(latencyCanvas, {
      type: "line",
      data: {
        datasets: [
          lineDataset(labels.labelAvg, COLORS.avg),
          lineDataset(labels.labelP50, COLORS.p50),
          lineDataset(labels.labelP95, COLORS.p95),
          lineDataset(labels.labelP99, COLORS.p99),
        ],
      },
      options: options(labels.labelSeconds, labels.labelMs, duration),
    });
  }

  RunCharts.prototype.after = function () {
    var last = this.seqs.length ? this.seqs[this.seqs.length - 1] : 0;
    if (!this.percentiles) {
      return last;
    }
    var lowest = last;
    for (var key in this.pending) {
      var seq = Number(key);
      if (seq > last - PERCENTILE_WINDOW && seq - 1 < lowest) {
        lowest = seq - 1;
      }
    }
    return lowest;
  };

  // Draw the charts now (``now``) or within REDRAW_MS of the last drawing, once.
  RunCharts.prototype.redraw = function (now) {
    var self = this;
    var since = Date.now() - this.drawnAt;
    if (now || since >= REDRAW_MS) {
      window.clearTimeout(this.redrawTimer);
      this.redrawTimer = null;
      this.drawnAt = Date.now();
      this.tps.update("none");
      this.latency.update("none");
      return;
    }
    if (this.redrawTimer === null) {
      this.redrawTimer = window.setTimeout(function () { self.redraw(true); }, REDRAW_MS - since);
    }
  };

  RunCharts.prototype.add = function (samples, final) {
    if (!this.tps) {
      for (var k = 0; k < samples.length; k++) {
        if (this.index[samples[k].seq] === undefined) {
          this.index[samples[k].seq] = this.seqs.length;
          this.seqs.push(samples[k].seq);
        }
      }
      return;
    }
    var tps = this.tps.data.datasets[0].data;
    var lat = this.latency.data.datasets;
    for (var i = 0; i < samples.length; i++) {
      var s = samples[i];
      var x = s.elapsed_s;
      var values = [s.latency_avg_ms, s.p50_ms, s.p95_ms, s.p99_ms];
      var at = this.index[s.seq];
      if (at === undefined) {
        this.index[s.seq] = tps.length;
        this.seqs.push(s.seq);
        tps.push({ x: x, y: s.tps });
        for (var d = 0; d < lat.length; d++) {
          lat[d].data.push({ x: x, y: values[d] });
        }
      } else {
        tps[at].y = s.tps;
        for (var e = 0; e < lat.length; e++) {
          lat[e].data[at].y = values[e];
        }
      }
      if (s.percentile_count === null || s.percentile_count === undefined) {
        this.pending[s.seq] = true;
      } else {
        delete this.pending[s.seq];
      }
    }
    if (samples.length || (final && this.redrawTimer !== null)) {
      this.redraw(final || this.drawnAt === 0);
    }
  };

  // The status card's figures from the poll's answer; the live part itself when its state changed.
  RunCharts.prototype.showLive = function (body) {
    var live = document.getElementById("bench-run-live");
    if (!live) {
      return;
    }
    if (body.state !== undefined && body.state !== live.dataset.state) {
      if (live.hasAttribute("hx-get")) {
        live.dispatchEvent(new CustomEvent("bench-run-changed"));
      }
      return; // the re-fetched part brings its own figures
    }
    var figures = body.figures;
    if (!figures) {
      return;
    }
    ["tps", "latency", "p95", "failed"].forEach(function (name) {
      var cell = live.querySelector("[data-figure='" + name + "']");
      if (cell && figures[name] !== undefined) {
        cell.textContent = figures[name];
      }
    });
    if (figures.progress !== undefined) {
      var elapsed = live.querySelector(".bench-run-elapsed");
      var percent = live.querySelector(".bench-run-progress");
      var bar = live.querySelector(".bench-run-bar");
      var fill = bar ? bar.querySelector("[data-progress]") : null;
      if (elapsed) {
        elapsed.textContent = figures.elapsed;
      }
      if (percent) {
        percent.textContent = String(figures.progress);
      }
      if (bar) {
        bar.setAttribute("aria-valuenow", String(figures.progress));
      }
      if (fill) {
        fill.dataset.progress = String(figures.progress);
        fill.style.width = figures.progress + "%";
      }
    }
  };

  RunCharts.prototype.schedule = function () {
    var self = this;
    window.setTimeout(function () { self.poll(); }, POLL_MS);
  };

  RunCharts.prototype.poll = function () {
    var self = this;
    window.PanelPoll.whenVisible(this.root, function () { self.fetch(); });
  };

  RunCharts.prototype.fetch = function () {
    var self = this;
    var live = document.getElementById("bench-run-live");
    var shown = live ? live.dataset.state || "" : "";
    var url = this.url + (this.url.indexOf("?") < 0 ? "?" : "&") + "after=" + this.after() +
      "&state=" + encodeURIComponent(shown);
    window.PanelPoll.getJSON(url)
      .then(function (body) {
        if (body === null) {
          self.schedule(); // nothing new
          return;
        }
        self.percentiles = body.percentiles;
        self.showLive(body);
        self.add(body.samples, Boolean(body.terminal) && !body.more);
        self.root.dataset.status = body.status;
        self.root.dataset.points = String(self.seqs.length);
        if (body.more) {
          self.poll(); // a long run: the rest of its samples at once
          return;
        }
        if (body.terminal) {
          self.terminalSeen += 1;
          var waiting = self.percentiles && Object.keys(self.pending).length && self.terminalSeen < 3;
          if (!waiting && self.terminalSeen >= 2) {
            self.root.dataset.done = "true";
            if (!self.seqs.length && self.root.dataset.labelNoSamples) {
              // Watched until it stopped without a sample: a sentence, not two empty charts.
              if (self.tps) {
                self.tps.destroy();
                self.latency.destroy();
              }
              var note = document.createElement("p");
              note.className = "text-body-secondary mb-0 bench-no-samples";
              note.textContent = self.root.dataset.labelNoSamples;
              self.root.replaceChildren(note);
            }
            return; // over: nothing more will come
          }
        }
        self.schedule();
      })
      .catch(function () {
        self.schedule();
      });
  };

  function start(scope) {
    (scope || document).querySelectorAll("[data-bench-run-charts]").forEach(function (root) {
      if (!root.benchCharts) {
        new RunCharts(root).poll();
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () { start(); });
  document.addEventListener("htmx:afterSettle", function (event) { start(event.target); });
})();
