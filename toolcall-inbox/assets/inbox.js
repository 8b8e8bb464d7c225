// The approval inbox's only script: countdowns, one submission per form,
// and a note when the inbox changed. The page works without it.
(function () {
  "use strict";
  function left(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("time.countdown[data-expires]").forEach(function (el) {
      var ms = Number(el.getAttribute("data-expires")) - now;
      el.textContent = ms > 0 ? "in " + left(ms) : "expired";
      el.classList.toggle("soon", ms < 60000);
    });
  }
  tick();
  setInterval(tick, 1000);

  // A double click is one request (the server keeps one decision anyway).
  document.querySelectorAll("form.decide, form.edit").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (form.getAttribute("data-sent")) { event.preventDefault(); return; }
      form.setAttribute("data-sent", "1");
      // After the submission has its data: a disabled button sends nothing.
      setTimeout(function () {
        form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      }, 0);
    });
  });

  // The page's own listing (its filters, order and page), asked again: a
  // note when its calls or their count changed.
  var inbox = document.querySelector("[data-pending-ids]");
  if (inbox) {
    var shown = inbox.getAttribute("data-pending-ids");
    var total = inbox.getAttribute("data-total");
    var api = inbox.getAttribute("data-api") || "/api/pending";
    setInterval(function () {
      fetch(api, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (page) {
          if (!page || !page.items) return;
          var ids = page.items.map(function (a) { return a.id; }).join(" ");
          var note = document.getElementById("changed");
          if ((ids !== shown || String(page.total) !== total) && note) {
            note.classList.remove("hidden");
          }
        })
        .catch(function () {});
    }, 5000);
  }
})();
