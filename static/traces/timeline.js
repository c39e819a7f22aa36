// The run page on a phone (traces/timeline.css, up to 600 px): each call is one line — its
// title, status and time — and a tap on the line (or its button) opens the rest: its
// tries, what went wrong, its approval, its technical details. The list folds only once
// this script runs (.timeline-folds on the root), so a phone without it shows every call
// open. A call opened stays open across the page's live refreshes, and the call a link
// points at (#call-… or one of its #attempt-…) opens by itself. On wider screens the bars
// show every call whole and a click changes nothing.
(function () {
  "use strict";
  const PHONE = window.matchMedia("(max-width: 600px)");
  let opened = [];
  // On the root, not on the table: a live refresh swaps the table in already folded.
  document.documentElement.classList.add("timeline-folds");

  function setOpen(call, open) {
    call.classList.toggle("open", open);
    const button = call.querySelector(".call-toggle");
    if (button) { button.setAttribute("aria-expanded", open ? "true" : "false"); }
  }
  function openTarget() {
    const id = decodeURIComponent(window.location.hash.slice(1));
    const target = id ? document.getElementById(id) : null;
    const call = target && target.closest("tbody.call");
    if (call) { setOpen(call, true); }
  }

  document.addEventListener("click", function (event) {
    if (!PHONE.matches || !event.target.closest) { return; }
    const row = event.target.closest(".waterfall tr.call-row");
    // A link on the line goes where it points.
    if (!row || event.target.closest("a")) { return; }
    const call = row.closest("tbody.call");
    setOpen(call, !call.classList.contains("open"));
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    const calls = event.detail.target.querySelectorAll("tbody.call.open[id]");
    opened = Array.from(calls, function (call) { return call.id; });
  });
  document.addEventListener("htmx:afterSwap", function () {
    opened.forEach(function (id) {
      const call = document.getElementById(id);
      if (call) { setOpen(call, true); }
    });
    opened = [];
  });
  window.addEventListener("hashchange", openTarget);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", openTarget);
  } else {
    openTarget();
  }
})();
