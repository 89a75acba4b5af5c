/* The run form: a pool implies its database (the select is disabled), a pool with a fixed user its
 * user (likewise, and the user is shown), the custom script box shows
 * only for "Custom script"; the engine (pgbench, sysbench or another registered one) shows its own fields and scripts, in
 * the run form, the data set form and the sweep form (which also shows only its kind's fields);
 * and the Compare button of the runs table needs two ticked runs.
 * Reads data- attributes, no inline scripts.
 */
(function () {
  "use strict";

  // The fields of one engine only ([data-bench-engine]); in the script select, that engine's
  // group of scripts (an <optgroup> labelled with the engine's name).
  function syncEngine(form) {
    var engine = form.querySelector("select[name='engine']");
    if (!engine) {
      return;
    }
    var chosen = engine.value || "pgbench";
    form.querySelectorAll("[data-bench-engine]").forEach(function (box) {
      // The engines that ask for this box's field, space-separated (from the registry of engines).
      box.classList.toggle("d-none", box.dataset.benchEngine.split(" ").indexOf(chosen) === -1);
    });
    var script = form.querySelector("select[name='script']");
    if (!script) {
      return;
    }
    var first = null;
    script.querySelectorAll("optgroup").forEach(function (group) {
      var mine = group.label === chosen;
      group.hidden = !mine;
      group.disabled = !mine;
      if (mine && !first && group.querySelector("option")) {
        first = group.querySelector("option").value;
      }
    });
    var selected = script.selectedOptions[0];
    if (first && (!selected || selected.parentElement.label !== chosen)) {
      script.value = first;
    }
  }

  function syncRunForm(form) {
    syncEngine(form);
    var target = form.querySelector("select[name='target']");
    var database = form.querySelector("[data-bench-database] select");
    if (target && database) {
      database.disabled = target.value !== "direct";
    }
    if (target) {
      syncUser(form, target.value);
    }
    var script = form.querySelector("select[name='script']");
    var custom = form.querySelector("[data-bench-custom]");
    if (script && custom) {
      custom.classList.toggle("d-none", script.value !== "custom");
    }
  }

  // A pool with a fixed user decides who logs in: the User select shows that user, disabled (a
  // disabled select is not posted, so the server uses the pool's user). Another target gives back
  // the user chosen before.
  function syncUser(form, targetValue) {
    var user = form.querySelector("[data-bench-user] select");
    var note = form.querySelector("[data-bench-pool-user]");
    if (!user) {
      return;
    }
    var fixed = null;
    try {
      fixed = JSON.parse(form.dataset.poolUsers || "{}")[targetValue] || null;
    } catch (error) {
      fixed = null;
    }
    if (fixed) {
      if (!user.disabled) {
        user.dataset.chosen = user.value;
      }
      user.value = fixed;
      user.disabled = true;
    } else if (user.disabled) {
      user.disabled = false;
      user.value = user.dataset.chosen || "";
    }
    if (note) {
      note.textContent = fixed ? note.dataset.template.replace("%(user)s", fixed) : "";
      note.classList.toggle("d-none", !fixed);
    }
  }

  // The sweep form: its engine's fields and scripts, and the fields of its kind (targets, or the
  // pool and its sizes) only.
  function syncSweepForm(form) {
    syncEngine(form);
    var kind = form.querySelector("input[name='kind']:checked");
    var chosen = kind ? kind.value : "targets";
    form.querySelectorAll("[data-bench-sweep-kind]").forEach(function (box) {
      box.classList.toggle("d-none", box.dataset.benchSweepKind !== chosen);
    });
  }

  function syncCompare(form) {
    var button = form.querySelector("button[type='submit']");
    if (button) {
      button.disabled = form.querySelectorAll("input[name='run']:checked").length < 2;
    }
  }

  function syncAll() {
    document.querySelectorAll("form[data-bench-run-form]").forEach(syncRunForm);
    document.querySelectorAll("form[data-bench-init-form]").forEach(syncEngine);
    document.querySelectorAll("form[data-bench-sweep-form]").forEach(syncSweepForm);
    document.querySelectorAll("form[data-bench-compare-form]").forEach(syncCompare);
  }

  document.addEventListener("change", function (event) {
    var runForm = event.target.closest && event.target.closest("form[data-bench-run-form]");
    if (runForm) {
      syncRunForm(runForm);
    }
    var initForm = event.target.closest && event.target.closest("form[data-bench-init-form]");
    if (initForm) {
      syncEngine(initForm);
    }
    var sweepForm = event.target.closest && event.target.closest("form[data-bench-sweep-form]");
    if (sweepForm) {
      syncSweepForm(sweepForm);
    }
    var compareForm = event.target.closest && event.target.closest("form[data-bench-compare-form]");
    if (compareForm) {
      syncCompare(compareForm);
    }
  });
  document.addEventListener("DOMContentLoaded", syncAll);
  document.addEventListener("htmx:afterSettle", syncAll);
})();
