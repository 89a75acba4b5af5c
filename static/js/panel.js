/* Behaviour shared by every page. Reads data- attributes: the Content-Security-Policy allows no
 * inline script, no inline style attribute and no eval.
 *
 *   data-copy-text="…"      copy this text
 *   data-copy-target="#id"  copy the value or text of that element
 *   data-copy-url="…"       fetch the text first (secrets that the page does not contain)
 *   data-copied-label="…"   the translated "Copied" feedback
 *   data-while-busy         a message about a job on the cluster ("… is being created"): it
 *                           leaves the page when the cluster's status moves on
 *   data-progress="42"      a progress bar's width in percent (set through the CSSOM, which the
 *                           policy allows, instead of a style attribute, which it refuses)
 *
 * Polling (hx-trigger="every …") pauses while the tab is hidden: htmx's own trigger filter
 * ("[document.visibilityState === …]") would need eval.
 *
 * Confirmations: a form with hx-confirm="question" asks in a modal made from base.html's
 * #confirm-modal-template (removed again once closed), never with the browser's confirm().
 * Its data- attributes shape the modal:
 *   data-confirm-title="…"   the modal's heading
 *   data-confirm-action="…"  the confirming button's label
 *   data-confirm-name="…"    the user types this name before the button is enabled (deletes, promote);
 *                            the typed name goes with the form as confirm_name, which the server checks
 *   data-confirm-safe        a blue button instead of a red one (nothing is lost)
 *
 * Plain forms (a full page load, such as the Actions menu) marked data-busy disable their buttons
 * once submitted: a second click would queue the action twice.
 *
 * PanelPoll is the one way the pages' own scripts (run charts, sweeps, Insights) poll:
 *   PanelPoll.whenVisible(root, fn)  run fn now if root is still on the page and the tab is
 *                                    visible, or once the tab is shown again; nothing if root left
 *   PanelPoll.getJSON(url)           a promise of the JSON body (null for 204 No Content),
 *                                    rejected for an error status; the session's cookies, no cache
 */
(function () {
  "use strict";

  window.PanelPoll = {
    whenVisible: function (root, run) {
      if (!document.body.contains(root)) {
        return; // the page part was replaced: whatever replaced it polls for itself
      }
      if (document.visibilityState === "visible") {
        run();
        return;
      }
      document.addEventListener("visibilitychange", function resume() {
        if (document.visibilityState === "visible") {
          document.removeEventListener("visibilitychange", resume);
          if (document.body.contains(root)) {
            run();
          }
        }
      });
    },
    getJSON: function (url) {
      var headers = { Accept: "application/json" };
      return fetch(url, { credentials: "same-origin", cache: "no-store", headers: headers }).then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.status === 204 ? null : response.json();
      });
    },
  };

  function copyWithTextarea(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.top = "-1000px";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try {
      ok = document.execCommand("copy");
    } catch (err) {
      ok = false;
    }
    document.body.removeChild(area);
    return ok;
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).then(
        function () { return true; },
        function () { return copyWithTextarea(text); }
      );
    }
    return Promise.resolve(copyWithTextarea(text));
  }

  function fetchText(url) {
    return fetch(url, { credentials: "same-origin", cache: "no-store" }).then(function (response) {
      if (!response.ok) {
        throw new Error("HTTP " + response.status);
      }
      return response.text();
    });
  }

  function copyFromUrl(url) {
    // Safari keeps the click's permission only if clipboard.write starts now with a promise.
    if (window.ClipboardItem && navigator.clipboard && navigator.clipboard.write && window.isSecureContext) {
      var blob = fetchText(url).then(function (text) {
        return new Blob([text], { type: "text/plain" });
      });
      return navigator.clipboard.write([new ClipboardItem({ "text/plain": blob })]).then(
        function () { return true; },
        function () { return fetchText(url).then(copyText); }
      );
    }
    return fetchText(url).then(copyText);
  }

  function showFeedback(button, ok) {
    if (!button.dataset.label) {
      button.dataset.label = button.textContent;
    }
    button.textContent = ok ? (button.dataset.copiedLabel || "Copied") : "✕";
    button.classList.toggle("is-copied", ok);
    button.classList.toggle("is-failed", !ok);
    window.clearTimeout(button._copyTimer);
    button._copyTimer = window.setTimeout(function () {
      button.textContent = button.dataset.label;
      button.classList.remove("is-copied", "is-failed");
    }, 1500);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy-text], [data-copy-target], [data-copy-url]");
    if (!button) {
      return;
    }
    event.preventDefault();
    var job;
    if (button.dataset.copyUrl) {
      job = copyFromUrl(button.dataset.copyUrl);
    } else if (button.dataset.copyTarget) {
      var target = document.querySelector(button.dataset.copyTarget);
      var text = target ? ("value" in target ? target.value : target.textContent) : "";
      job = copyText(text.trim());
    } else {
      job = copyText(button.dataset.copyText);
    }
    job.then(
      function (ok) { showFeedback(button, ok !== false); },
      function () { showFeedback(button, false); }
    );
  });

  function applyProgress(root) {
    var bars = root.querySelectorAll ? root.querySelectorAll("[data-progress]") : [];
    Array.prototype.forEach.call(bars, function (bar) {
      var value = Math.max(0, Math.min(100, parseFloat(bar.dataset.progress) || 0));
      bar.style.width = value + "%";
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { applyProgress(document); });
  } else {
    applyProgress(document);
  }
  // htmx:load fires for every element htmx swaps in.
  document.addEventListener("htmx:load", function (event) {
    applyProgress(event.target.parentNode || event.target);
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    var trigger = elt && elt.getAttribute ? elt.getAttribute("hx-trigger") || "" : "";
    if (document.visibilityState === "hidden" && /^\s*every\s/.test(trigger)) {
      event.preventDefault();
    }
  });

  var pendingConfirm = null;

  function confirmParts(modal) {
    return {
      title: modal.querySelector("[data-confirm-title]"),
      question: modal.querySelector("[data-confirm-question]"),
      typed: modal.querySelector("[data-confirm-typed]"),
      expected: modal.querySelector("[data-confirm-expected]"),
      input: modal.querySelector("[data-confirm-input]"),
      ok: modal.querySelector("[data-confirm-ok]"),
    };
  }

  function askConfirm(modal, source, question, proceed) {
    var parts = confirmParts(modal);
    var name = source.dataset.confirmName || "";
    parts.title.textContent = source.dataset.confirmTitle || modal.dataset.defaultTitle;
    parts.question.textContent = question;
    parts.ok.textContent = source.dataset.confirmAction || modal.dataset.defaultAction;
    var safe = source.hasAttribute("data-confirm-safe");
    parts.ok.classList.toggle("btn-danger", !safe);
    parts.ok.classList.toggle("btn-primary", safe);
    parts.typed.hidden = !name;
    parts.expected.textContent = name;
    parts.input.value = "";
    parts.input.required = !!name;
    parts.ok.disabled = !!name;
    pendingConfirm = { name: name, proceed: proceed };
    window.bootstrap.Modal.getOrCreateInstance(modal).show();
  }

  function confirmModal() {
    var modal = document.getElementById("confirm-modal");
    var template = document.getElementById("confirm-modal-template");
    if (!modal && template) {
      document.body.appendChild(template.content.cloneNode(true));
      modal = document.getElementById("confirm-modal");
    }
    return modal;
  }

  // The server refuses a delete or a promote without the typed name (a replayed POST changes
  // nothing): it goes with the form, in a hidden field htmx sends with the others.
  function carryTypedName(source, typed) {
    var form = source.closest("form");
    if (!form) {
      return;
    }
    var field = form.querySelector("input[name='confirm_name']");
    if (!field) {
      field = document.createElement("input");
      field.type = "hidden";
      field.name = "confirm_name";
      form.appendChild(field);
    }
    field.value = typed;
  }

  document.addEventListener("htmx:confirm", function (event) {
    var question = event.detail.question;
    var modal = question && window.bootstrap ? confirmModal() : null;
    if (!modal) {
      return; // nothing to ask (or no modal on this page: htmx falls back to the browser's dialog)
    }
    event.preventDefault();
    var source = event.detail.elt.closest("[hx-confirm]") || event.detail.elt;
    askConfirm(modal, source, question, function (typed) {
      if (typed) {
        carryTypedName(source, typed);
      }
      event.detail.issueRequest(true);
    });
  });

  document.addEventListener("input", function (event) {
    if (pendingConfirm && event.target.matches("#confirm-modal [data-confirm-input]")) {
      confirmParts(document.getElementById("confirm-modal")).ok.disabled = event.target.value !== pendingConfirm.name;
    }
  });

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id === "confirm-modal-form") {
      event.preventDefault();
      var modal = document.getElementById("confirm-modal");
      var parts = confirmParts(modal);
      if (!pendingConfirm || (pendingConfirm.name && parts.input.value !== pendingConfirm.name)) {
        return;
      }
      var proceed = pendingConfirm.proceed;
      var typed = pendingConfirm.name ? parts.input.value : "";
      pendingConfirm = null;
      hideModal(modal);
      proceed(typed);
      return;
    }
    if (form.matches("form[data-busy]") && !event.defaultPrevented) {
      window.setTimeout(function () {
        form.setAttribute("aria-busy", "true");
        Array.prototype.forEach.call(form.querySelectorAll("button"), function (button) { button.disabled = true; });
      }, 0);
    }
  });

  // Bootstrap's Modal.hide() does nothing while the modal still fades in: a close asked for then
  // (a quick Cancel or Close, a confirm) would leave it open, so it waits for the modal to be shown.
  function hideModal(modal) {
    if (modal.dataset.modalState === "opening") {
      modal.dataset.modalHideWhenShown = "";
    } else {
      window.bootstrap.Modal.getOrCreateInstance(modal).hide(); // shown, or already closing
    }
  }

  document.addEventListener("show.bs.modal", function (event) {
    event.target.dataset.modalState = "opening";
    delete event.target.dataset.modalHideWhenShown; // a close asked for before it was reopened
  });
  document.addEventListener("hide.bs.modal", function (event) {
    delete event.target.dataset.modalState;
    delete event.target.dataset.modalHideWhenShown;
  });
  // Bootstrap's own handler of a [data-bs-dismiss] button ignores a click during the fade-in.
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-bs-dismiss='modal']");
    var modal = button && button.closest(".modal");
    if (modal && modal.dataset.modalState === "opening") {
      hideModal(modal);
    }
  });

  document.addEventListener("shown.bs.modal", function (event) {
    var modal = event.target;
    modal.dataset.modalState = "shown";
    if (modal.dataset.modalHideWhenShown !== undefined) {
      delete modal.dataset.modalHideWhenShown;
      window.bootstrap.Modal.getOrCreateInstance(modal).hide();
      return;
    }
    if (modal.id === "confirm-modal") {
      var parts = confirmParts(event.target);
      (parts.typed.hidden ? parts.ok : parts.input).focus();
    }
  });

  document.addEventListener("hidden.bs.modal", function (event) {
    if (event.target.id === "confirm-modal") {
      pendingConfirm = null; // closed or cancelled: the request is never sent
      window.bootstrap.Modal.getOrCreateInstance(event.target).dispose();
      event.target.remove();
    }
  });

  // The live header found the status moved on: a message about the job that was running is stale.
  document.body.addEventListener("cluster-status-changed", function () {
    Array.prototype.forEach.call(document.querySelectorAll("[data-while-busy]"), function (alert) {
      alert.remove();
    });
  });

  // After htmx re-renders a form with errors, put the cursor in the first invalid field.
  document.addEventListener("htmx:afterSettle", function () {
    var invalid = document.querySelector(".modal.show .is-invalid, #users-tab [aria-invalid='true']");
    if (invalid) {
      invalid.focus();
    }
  });
})();
