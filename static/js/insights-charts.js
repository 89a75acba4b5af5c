/* The Insights tab's charts: every chart of a cluster over one time window, refreshed every 15 s.
 *
 * An element marked data-insights carries data-url (the tab's JSON endpoint), data-query (the
 * window: "range=6h" or "start=…&end=…"), data-live ("true" when the window ends now: refresh) and
 * data-refresh-ms. It holds <canvas data-chart="<key>" data-unit data-unit2 data-max>, one per chart
 * of the JSON's "charts": {key: {t: [ms…], series: [{label, values, axis?, limit?}]}}; a null value
 * is a gap and breaks the line. The range buttons (a[data-range-key]) switch the window without a
 * reload. Polling pauses while the tab is hidden. Chart.getChart(canvas) returns each chart. A
 * chart the JSON has and the page does not (a pool created since it was rendered) gets a card.
 * The x axis is a time scale with regular UTC ticks (chart-axes.js); it starts where the data
 * starts when that is later than the window's start (a young cluster), and ends with the window.
 */
(function () {
  "use strict";

  var COLORS = ["#0069ff", "#2e9e5b", "#f0a202", "#d63b3b", "#7b4fd6", "#14a3b8", "#e0628a", "#5b6b82"];
  var LIMIT_COLOR = "#8a94a6";

  var compact = window.PanelLocale.compact;

  function bytes(value) {
    var units = ["B", "KB", "MB", "GB", "TB"];
    var i = 0;
    while (Math.abs(value) >= 1024 && i < units.length - 1) {
      value /= 1024;
      i++;
    }
    var whole = i === 0 && (Math.abs(value) >= 10 || value === Math.round(value));
    return window.PanelLocale.number(value, whole ? 0 : 1) + " " + units[i];
  }

  function formatter(unit) {
    if (unit === "B") return bytes;
    if (unit === "B/s") return function (v) { return bytes(v) + "/s"; };
    if (unit === "%") return function (v) { return compact(v) + " %"; };
    if (unit === "1/s") return function (v) { return compact(v) + "/s"; };
    if (unit === "s") return function (v) { return compact(v) + " s"; };
    return compact;
  }

  // A point with no neighbour (one collection between gaps, or a window a few seconds old) would
  // be invisible as a line of zero length: draw it as a dot.
  function isolatedRadius(ctx) {
    var data = ctx.dataset.data;
    var i = ctx.dataIndex;
    var alone = (i === 0 || data[i - 1] === null) && (i === data.length - 1 || data[i + 1] === null);
    return alone ? 2.5 : 0;
  }

  // What one point stands for, by resolution (translated, from the page).
  var RESOLUTIONS = (function () {
    var node = document.getElementById("insights-resolutions");
    try {
      return node ? JSON.parse(node.textContent) : {};
    } catch (error) {
      return {};
    }
  })();

  function InsightsCharts(root) {
    this.root = root;
    this.charts = {};
    this.timer = null;
    this.generation = 0; // a late answer for a window no longer shown is dropped
    root.insightsCharts = this;
    var self = this;
    root.parentNode.querySelectorAll("a[data-range-key]").forEach(function (link) {
      link.addEventListener("click", function (event) {
        if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
        event.preventDefault();
        self.select(link);
      });
    });
  }

  InsightsCharts.prototype.select = function (link) {
    var key = link.dataset.rangeKey;
    link.parentNode.querySelectorAll("a[data-range-key]").forEach(function (other) {
      var on = other === link;
      other.classList.toggle("active", on);
      other.setAttribute("aria-pressed", on ? "true" : "false");
    });
    this.root.dataset.query = "range=" + encodeURIComponent(key);
    this.root.dataset.range = key;
    this.root.dataset.live = "true";
    var windowNote = document.querySelector("[data-window]");
    if (windowNote && windowNote.dataset.rangeNote) windowNote.textContent = windowNote.dataset.rangeNote;
    if (window.history && window.history.replaceState) {
      window.history.replaceState(null, "", "?range=" + encodeURIComponent(key));
    }
    this.fetch();
  };

  InsightsCharts.prototype.chartFor = function (canvas) {
    var key = canvas.dataset.chart;
    if (this.charts[key]) return this.charts[key];
    var unit = canvas.dataset.unit || "";
    var unit2 = canvas.dataset.unit2 || "";
    var format = formatter(unit);
    var format2 = formatter(unit2);
    var max = canvas.dataset.max ? Number(canvas.dataset.max) : undefined;
    var self = this;
    var chart = new window.Chart(canvas, {
      type: "line",
      data: { labels: [], datasets: [] },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        normalized: true,
        interaction: { mode: "index", intersect: false },
        scales: {
          x: window.PanelAxes.time(),
          y: { beginAtZero: true, max: max, ticks: { callback: function (v) { return format(v); } } },
          y1: {
            display: "auto",
            position: "right",
            beginAtZero: true,
            grid: { drawOnChartArea: false },
            ticks: { callback: function (v) { return format2(v); } },
          },
        },
        plugins: {
          legend: { display: true, position: "bottom", labels: { boxWidth: 12 } },
          tooltip: {
            callbacks: {
              title: function (items) {
                return items.length ? window.PanelAxes.utcLabel(items[0].parsed.x) : "";
              },
              label: function (item) {
                var f = item.dataset.yAxisID === "y1" ? format2 : format;
                var text = item.dataset.label + ": " + (item.parsed.y === null ? "—" : f(item.parsed.y));
                var peak = item.dataset.peaks ? item.dataset.peaks[item.dataIndex] : null;
                if (peak !== null && peak !== undefined && peak !== item.parsed.y) {
                  text += " (" + self.root.dataset.peakLabel + " " + f(peak) + ")";
                }
                return text;
              },
            },
          },
        },
      },
    });
    this.charts[key] = chart;
    return chart;
  };

  // A chart the page was rendered without (a pool created since): a card like the others, in its
  // group, the group made if it is the first of its kind.
  InsightsCharts.prototype.addCard = function (key, data) {
    var grid = this.root.querySelector(".insights-grid[data-group='" + data.group + "']");
    if (!grid) {
      var heading = document.createElement("h3");
      heading.className = "h6 insights-group-title";
      heading.textContent = data.group === "pool" ? this.root.dataset.poolHeading : data.group;
      grid = document.createElement("div");
      grid.className = "insights-grid mb-4";
      grid.dataset.group = data.group;
      this.root.appendChild(heading);
      this.root.appendChild(grid);
    }
    var card = document.createElement("section");
    card.className = "card insights-chart-card";
    card.setAttribute("aria-label", data.title);
    var body = document.createElement("div");
    body.className = "card-body";
    var title = document.createElement("h4");
    title.className = "insights-chart-title";
    title.textContent = data.title;
    var box = document.createElement("div");
    box.className = "insights-chart-box";
    var canvas = document.createElement("canvas");
    canvas.dataset.chart = key;
    canvas.dataset.unit = data.unit || "";
    canvas.dataset.unit2 = data.unit2 || "";
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", data.title);
    var empty = document.createElement("div");
    empty.className = "insights-chart-empty";
    empty.textContent = this.root.dataset.emptyText || "";
    box.appendChild(canvas);
    box.appendChild(empty);
    body.appendChild(title);
    body.appendChild(box);
    card.appendChild(body);
    grid.appendChild(card);
  };

  InsightsCharts.prototype.draw = function (body) {
    var self = this;
    var points = 0;
    // A cluster younger than the window: its data fills the chart instead of a sliver at the end.
    var start = body.end;
    Object.keys(body.charts).forEach(function (key) {
      var t = body.charts[key].t;
      if (t.length && t[0] < start) start = t[0];
    });
    start = Math.max(body.start, start === body.end ? body.start : start);
    var drawn = {};
    this.root.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      drawn[canvas.dataset.chart] = true;
    });
    Object.keys(body.charts).forEach(function (key) {
      if (!drawn[key] && body.charts[key].title) self.addCard(key, body.charts[key]);
    });
    this.root.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      var data = body.charts[canvas.dataset.chart] || { t: [], series: [] };
      var chart = self.chartFor(canvas);
      var colour = 0;
      chart.data.labels = data.t;
      chart.data.datasets = data.series.map(function (s) {
        var color = s.limit ? LIMIT_COLOR : COLORS[colour++ % COLORS.length];
        return {
          label: s.label,
          data: s.values,
          peaks: s.max || null,
          yAxisID: s.axis || "y",
          borderColor: color,
          backgroundColor: color,
          borderWidth: s.limit ? 1.5 : 2,
          borderDash: s.limit ? [6, 4] : [],
          stepped: s.limit ? "before" : false,
          pointRadius: isolatedRadius,
          pointHitRadius: 6,
          tension: 0,
          spanGaps: false,
        };
      });
      chart.options.scales.x.min = start;
      chart.options.scales.x.max = body.end;
      chart.update("none");
      var present = data.series.some(function (s) {
        return s.values.some(function (v) { return v !== null; });
      });
      canvas.parentNode.classList.toggle("is-empty", !present);
      points += data.t.length;
    });
    this.root.dataset.points = String(points);
    // The "no metrics yet" card goes once the first collection is drawn.
    var empty = document.querySelector(".insights-empty");
    if (empty && points > 0) empty.hidden = true;
    this.root.dataset.resolution = body.resolution || "";
    var note = document.querySelector("[data-resolution-note]");
    if (note && RESOLUTIONS[body.resolution]) note.textContent = RESOLUTIONS[body.resolution];
    this.root.dataset.loadedRange = body.range || "custom";
    this.root.dataset.loadedAt = String(Date.now());
  };

  InsightsCharts.prototype.schedule = function () {
    var self = this;
    window.clearTimeout(this.timer);
    if (this.root.dataset.live !== "true") return; // a window in the past does not change
    this.timer = window.setTimeout(function () { self.poll(); }, Number(this.root.dataset.refreshMs) || 15000);
  };

  InsightsCharts.prototype.poll = function () {
    var self = this;
    window.PanelPoll.whenVisible(this.root, function () { self.fetch(); });
  };

  InsightsCharts.prototype.fetch = function () {
    var self = this;
    var generation = ++this.generation;
    window.clearTimeout(this.timer);
    var url = this.root.dataset.url + "?" + this.root.dataset.query;
    this.root.dataset.loading = "true";
    window.PanelPoll.getJSON(url)
      .then(function (body) {
        if (generation !== self.generation) return;
        self.draw(body);
        delete self.root.dataset.loading;
        self.schedule();
      })
      .catch(function () {
        if (generation !== self.generation) return;
        delete self.root.dataset.loading;
        self.schedule();
      });
  };

  function start() {
    if (!window.Chart) return;
    document.querySelectorAll("[data-insights]").forEach(function (root) {
      if (!root.insightsCharts) new InsightsCharts(root).fetch();
    });
  }

  document.addEventListener("DOMContentLoaded", start);
  // A tab swapped in by HTMX (the cluster page refreshes it when a job ends) brings new canvases.
  document.addEventListener("htmx:afterSettle", start);
})();
