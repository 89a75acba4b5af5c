/* The API documentation page: Swagger UI (static/vendor/swagger-ui) on the schema named by
 * #swagger-ui's data-schema-url. No inline script: the page's Content-Security-Policy is the
 * panel's own.
 *
 * Authorize takes a bearer token (the schema's security scheme); it is kept in memory only, not
 * in localStorage, so closing the tab forgets it.
 */
(function () {
  "use strict";

  function start() {
    var root = document.getElementById("swagger-ui");
    if (!root || typeof window.SwaggerUIBundle !== "function") {
      return;
    }
    window.SwaggerUIBundle({
      url: root.dataset.schemaUrl,
      domNode: root,
      deepLinking: true,
      persistAuthorization: false,
      displayRequestDuration: true,
      // Swagger UI would send the schema to validator.swagger.io and show its badge.
      validatorUrl: null,
      presets: [window.SwaggerUIBundle.presets.apis],
      layout: "BaseLayout",
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
