/* The page's language for scripts: numbers and dates as the server formats them (panel/formats).
 *
 * PanelLocale.lang        the <html lang> of the page ("en", "de")
 * PanelLocale.number(v, digits)   1,234.5 / 1.234,5 with exactly `digits` decimals
 * PanelLocale.compact(v)  a short figure for chart ticks (1.2k, 3.4M; decimals per language)
 * PanelLocale.utcDate(ms) / utcDay(ms)   2026-11-24 / 11-24 in English, 24.11.2026 / 24.11. in German
 * PanelLocale.chart(Chart)  sets Chart.js's locale (its tick and tooltip numbers), called by the
 *                         chart scripts after Chart.js has loaded.
 */
(function () {
  "use strict";

  var lang = document.documentElement.lang || "en";
  var german = lang.slice(0, 2) === "de";
  var formats = {};

  function formatter(digits) {
    if (!formats[digits]) {
      formats[digits] = new Intl.NumberFormat(lang, {
        minimumFractionDigits: digits,
        maximumFractionDigits: digits,
      });
    }
    return formats[digits];
  }

  function pad(n) {
    return n < 10 ? "0" + n : String(n);
  }

  window.PanelLocale = {
    lang: lang,
    number: function (value, digits) {
      return formatter(digits || 0).format(value);
    },
    compact: function (value) {
      var abs = Math.abs(value);
      if (abs >= 1e9) return formatter(1).format(value / 1e9) + "G";
      if (abs >= 1e6) return formatter(1).format(value / 1e6) + "M";
      if (abs >= 1e4) return formatter(1).format(value / 1e3) + "k";
      if (abs >= 100 || value === Math.round(value)) return formatter(0).format(value);
      return formatter(abs >= 1 ? 1 : 3).format(value);
    },
    utcDate: function (ms) {
      var d = new Date(ms);
      var y = d.getUTCFullYear(), m = pad(d.getUTCMonth() + 1), day = pad(d.getUTCDate());
      return german ? day + "." + m + "." + y : y + "-" + m + "-" + day;
    },
    utcDay: function (ms) {
      var d = new Date(ms);
      var m = pad(d.getUTCMonth() + 1), day = pad(d.getUTCDate());
      return german ? day + "." + m + "." : m + "-" + day;
    },
    chart: function (Chart) {
      if (Chart && Chart.defaults) Chart.defaults.locale = lang;
    },
  };
})();
