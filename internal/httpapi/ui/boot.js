// Starts the status page's first request for the topics while the rest
// of the page loads (app.js runs only once the document is parsed): the
// topics are the page's first paint. app.js takes the answer (FIRST_PATH
// there; the token as it reads it).
"use strict";
window.kmirrorFirst = (function () {
  const token = sessionStorage.getItem("kmirror.token") || localStorage.getItem("kmirror.token") || "";
  return {
    path: "api/v1/status?limit=100&order=failed",
    response: fetch("api/v1/status?limit=100&order=failed", {
      headers: token ? { Authorization: "Bearer " + token } : {}, cache: "no-store", credentials: "same-origin",
    }),
  };
})();
