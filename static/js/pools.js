/* Connection pools: the budget shown as you type the pool size, the button that opens the create
 * form, and the delete dialog's reset.
 *
 * A form marked data-pool-budget carries data-used (connections already allocated, this pool
 * included), data-total (the plan's budget) and data-own (this pool's current size, 0 for a new
 * pool). Its [data-budget-output] element holds the translated templates in data-template and
 * data-over-template, with %(used)s, %(total)s, %(left)s and %(over)s placeholders.
 */
(function () {
  "use strict";

  function format(template, values) {
    return template.replace(/%\((\w+)\)s/g, function (match, key) {
      return key in values ? String(values[key]) : match;
    });
  }

  function update(form) {
    var output = form.querySelector("[data-budget-output]");
    var input = form.querySelector("input[name$='size']");
    if (!output || !input) {
      return;
    }
    var used = parseInt(form.dataset.used, 10) || 0;
    var total = parseInt(form.dataset.total, 10) || 0;
    var own = parseInt(form.dataset.own, 10) || 0;
    var size = parseInt(input.value, 10);
    // An empty or invalid size changes nothing yet.
    var after = size > 0 ? used - own + size : used;
    var over = after > total;
    var template = over ? output.dataset.overTemplate : output.dataset.template;
    output.textContent = format(template, {
      used: after,
      total: total,
      left: Math.max(total - after, 0),
      over: Math.max(after - total, 0),
    });
    output.classList.toggle("is-over", over);
  }

  function updateAll(root) {
    (root || document).querySelectorAll("form[data-pool-budget]").forEach(update);
  }

  document.addEventListener("input", function (event) {
    var form = event.target.closest && event.target.closest("form[data-pool-budget]");
    if (form) {
      update(form);
    }
  });
  document.addEventListener("DOMContentLoaded", function () { updateAll(); });
  document.addEventListener("htmx:afterSettle", function () { updateAll(); });

  // "Create a connection pool" opens the form and puts the cursor in it; when the form is open
  // already (an empty tab opens it), it only brings it into view: a toggle would hide it.
  function focusCreateForm(panel) {
    var field = panel.querySelector("input:not([type='hidden']), select");
    panel.scrollIntoView({ block: "nearest", behavior: "smooth" });
    if (field) {
      field.focus({ preventScroll: true });
    }
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-pool-create-open]");
    if (!button) {
      return;
    }
    var panel = document.getElementById(button.getAttribute("aria-controls"));
    if (!panel) {
      return;
    }
    button.setAttribute("aria-expanded", "true");
    if (panel.classList.contains("show")) {
      focusCreateForm(panel);
      return;
    }
    panel.addEventListener("shown.bs.collapse", function () { focusCreateForm(panel); }, { once: true });
    window.bootstrap.Collapse.getOrCreateInstance(panel, { toggle: false }).show();
  });
  document.addEventListener("hidden.bs.collapse", function (event) {
    document.querySelectorAll("[data-pool-create-open]").forEach(function (button) {
      if (button.getAttribute("aria-controls") === event.target.id) {
        button.setAttribute("aria-expanded", "false");
      }
    });
  });

  // A reopened delete dialog must not show the previous pool's count while the new one loads.
  document.addEventListener("hidden.bs.modal", function (event) {
    var body = event.target.querySelector("#delete-pool-body");
    if (body && body.dataset.placeholder !== undefined) {
      body.innerHTML = body.dataset.placeholder;
    }
  });
  document.addEventListener("show.bs.modal", function (event) {
    var body = event.target.querySelector("#delete-pool-body");
    if (body && body.dataset.placeholder === undefined) {
      body.dataset.placeholder = body.innerHTML;
    }
  });
})();
