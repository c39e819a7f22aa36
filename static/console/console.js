// The run page refreshes its body every 3 s while the run can change (htmx polling).
// Keep the <details> an operator opened (args, result) open across those refreshes.
(function () {
  "use strict";
  let opened = [];
  document.addEventListener("htmx:beforeSwap", function (event) {
    opened = Array.from(
      event.detail.target.querySelectorAll("details[open][id]"),
      function (details) { return details.id; }
    );
  });
  document.addEventListener("htmx:afterSwap", function () {
    opened.forEach(function (id) {
      const details = document.getElementById(id);
      if (details) { details.open = true; }
    });
    opened = [];
  });
})();
