/* X axes shared by the panel's charts: ticks at regular, round intervals.
 *
 * PanelAxes.time(options) — a Chart.js time scale (the date-fns adapter, vendored) whose ticks are
 *   placed here, every 1/2/5/10/15/30 s, 1/2/5/10/15/30 min, 1/2/3/6/12 h or 1/2/7 days, on multiples
 *   of that step since the epoch: round UTC times whatever the browser's time zone. Labels are UTC
 *   too (the panel shows every time in UTC): HH:MM:SS under a minute, HH:MM under a day, MM-DD HH:MM
 *   over a window longer than a day, MM-DD for whole days (German pages: DD.MM., locale.js).
 * PanelAxes.seconds(options) — a linear axis of seconds since a run started, ticks every
 *   1/2/5/10/15/30 s, 1/2/5/10/15/30 min or 1 h, starting at 0.
 * PanelAxes.utcLabel(ms) — a point's time for a tooltip: YYYY-MM-DD HH:MM:SS UTC (DD.MM.YYYY in German).
 *
 * Both axes read their span from the scale when ticks are built, so a window that grows (a live
 * run, a young cluster) keeps regular ticks; at most MAX_TICKS of them.
 */
(function () {
  "use strict";

  window.PanelLocale.chart(window.Chart);  // tick and tooltip numbers in the page's language

  var SECOND = 1000;
  var MINUTE = 60 * SECOND;
  var HOUR = 60 * MINUTE;
  var DAY = 24 * HOUR;
  var MAX_TICKS = 8;
  var TIME_STEPS = [
    SECOND, 2 * SECOND, 5 * SECOND, 10 * SECOND, 15 * SECOND, 30 * SECOND,
    MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE,
    HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR,
    DAY, 2 * DAY, 7 * DAY,
  ];
  var SECOND_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];

  // The smallest step that keeps the span within MAX_TICKS ticks.
  function step(span, steps) {
    for (var i = 0; i < steps.length; i++) {
      if (span / steps[i] <= MAX_TICKS) return steps[i];
    }
    return steps[steps.length - 1] * Math.ceil(span / (steps[steps.length - 1] * MAX_TICKS));
  }

  function regularTicks(min, max, every) {
    var ticks = [];
    for (var value = Math.ceil(min / every) * every; value <= max; value += every) {
      ticks.push({ value: value });
    }
    return ticks;
  }

  function pad(n) {
    return n < 10 ? "0" + n : String(n);
  }

  function utcParts(ms) {
    var d = new Date(ms);
    return {
      date: window.PanelLocale.utcDate(ms),
      day: window.PanelLocale.utcDay(ms),
      hm: pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()),
      s: pad(d.getUTCSeconds()),
    };
  }

  function timeTickLabel(ms, every, span) {
    var p = utcParts(ms);
    if (every >= DAY) return p.day;
    if (every < MINUTE) return p.hm + ":" + p.s;
    return span > DAY ? p.day + " " + p.hm : p.hm;
  }

  function utcLabel(ms) {
    var p = utcParts(ms);
    return p.date + " " + p.hm + ":" + p.s + " UTC";
  }

  // extra: other scale options (title, grid…), merged in.
  function time(extra) {
    var axis = {
      type: "time",
      ticks: {
        autoSkip: false,
        maxRotation: 0,
        callback: function (value) {
          return timeTickLabel(value, this.panelStep, this.max - this.min);
        },
      },
      afterBuildTicks: function (scale) {
        scale.panelStep = step(scale.max - scale.min, TIME_STEPS);
        scale.ticks = regularTicks(scale.min, scale.max, scale.panelStep);
      },
    };
    return Object.assign(axis, extra || {});
  }

  function seconds(extra) {
    var axis = {
      type: "linear",
      min: 0,
      ticks: { autoSkip: false, maxRotation: 0 },
      afterBuildTicks: function (scale) {
        scale.ticks = regularTicks(scale.min, scale.max, step(scale.max - scale.min, SECOND_STEPS));
      },
    };
    return Object.assign(axis, extra || {});
  }

  window.PanelAxes = { time: time, seconds: seconds, utcLabel: utcLabel, MAX_TICKS: MAX_TICKS };
})();
