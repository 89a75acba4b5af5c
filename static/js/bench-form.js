/* The run form: a pool implies its database (the select is disabled), the custom script box shows
 * only for "Custom script"; and the Compare button of the runs table needs two ticked runs.
 * Reads data- attributes, no inline scripts.
 */
(function () {
  "use strict";

  function syncRunForm(form) {
    var target = form.querySelector("select[name='target']");
    var database = form.querySelector("[data-bench-database] select");
    if (target && database) {
      database.disabled = target.value !== "direct";
    }
    var script = form.querySelector("select[name='script']");
    var custom = form.querySelector("[data-bench-custom]");
    if (script && custom) {
      custom.classList.toggle("d-none", script.value !== "custom");
    }
  }

  function syncCompare(form) {
    var button = form.querySelector("button[type='submit']");
    if (button) {
      button.disabled = form.querySelectorAll("input[name='run']:checked").length < 2;
    }
  }

  function syncAll() {
    document.querySelectorAll("form[data-bench-run-form]").forEach(syncRunForm);
    document.querySelectorAll("form[data-bench-compare-form]").forEach(syncCompare);
  }

  document.addEventListener("change", function (event) {
    var runForm = event.target.closest && event.target.closest("form[data-bench-run-form]");
    if (runForm) {
      syncRunForm(runForm);
    }
    var compareForm = event.target.closest && event.target.closest("form[data-bench-compare-form]");
    if (compareForm) {
      syncCompare(compareForm);
    }
  });
  document.addEventListener("DOMContentLoaded", syncAll);
  document.addEventListener("htmx:afterSettle", syncAll);
})();
