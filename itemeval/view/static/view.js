// itemeval view: reload the page when new rows land in the store (a run under way).
// The server names what the store holds (/api/version); the page carries the name it was
// rendered from (body[data-version]). "pause" stops the reloads (remembered in this browser).
(function () {
  "use strict";
  var rendered = document.body.getAttribute("data-version");
  var live = document.getElementById("live");
  var button = document.getElementById("pause");
  var KEY = "itemeval-view-paused";
  function paused() { return window.localStorage.getItem(KEY) === "1"; }
  function show() {
    button.textContent = paused() ? "resume" : "pause";
    live.textContent = paused() ? "paused" : "live";
    live.className = paused() ? "live paused" : "live";
  }
  button.addEventListener("click", function () {
    window.localStorage.setItem(KEY, paused() ? "0" : "1");
    show();
  });
  show();
  function poll() {
    fetch("/api/version", { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) {
        if (!d) { return; }
        if (d.version !== rendered) {
          if (paused()) { live.textContent = "new rows (paused)"; }
          else { window.location.reload(); }
        }
      })
      .catch(function () { live.textContent = "offline"; });
  }
  window.setInterval(poll, 2000);
})();
