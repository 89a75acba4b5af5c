/* Behaviour shared by every page. Reads data- attributes: the Content-Security-Policy allows no
 * inline script, no inline style attribute and no eval.
 *
 *   data-copy-text="…"      copy this text
 *   data-copy-target="#id"  copy the value or text of that element
 *   data-copy-url="…"       fetch the text first (secrets that the page does not contain)
 *   data-copied-label="…"   the translated "Copied" feedback
 *   data-progress="42"      a progress bar's width in percent (set through the CSSOM, which the
 *                           policy allows, instead of a style attribute, which it refuses)
 *
 * Polling (hx-trigger="every …") pauses while the tab is hidden: htmx's own trigger filter
 * ("[document.visibilityState === …]") would need eval.
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

  // After htmx re-renders a form with errors, put the cursor in the first invalid field.
  document.addEventListener("htmx:afterSettle", function () {
    var invalid = document.querySelector(".modal.show .is-invalid, #users-tab [aria-invalid='true']");
    if (invalid) {
      invalid.focus();
    }
  });
})();
