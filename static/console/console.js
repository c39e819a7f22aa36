// Live pages refresh a region every few seconds (htmx polling), or when the server
// pushes a change. Keep what a person had opened or ticked — <details id>, checkboxes
// marked data-keep — across those refreshes.
(function () {
  "use strict";
  let opened = [];
  let ticked = [];
  document.addEventListener("htmx:beforeSwap", function (event) {
    const target = event.detail.target;
    opened = Array.from(target.querySelectorAll("details[open][id]"), function (d) { return d.id; });
    ticked = Array.from(target.querySelectorAll("input[data-keep]:checked"), function (i) { return i.id; });
  });
  document.addEventListener("htmx:afterSwap", function () {
    opened.forEach(function (id) {
      const details = document.getElementById(id);
      if (details) { details.open = true; }
    });
    ticked.forEach(function (id) {
      const box = document.getElementById(id);
      if (box) { box.checked = true; }
    });
    opened = [];
    ticked = [];
  });
})();

// The support desk with a shared channel layer (REDIS_URL): the server pushes "a ticket
// changed" over a WebSocket, and the page's live region (hx-trigger="tickets-changed
// from:body") fetches itself again. Reconnects with growing pauses if the socket drops.
(function () {
  "use strict";
  const body = document.body;
  if (!body || !body.dataset.push) { return; }
  let pause = 1000;
  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(scheme + "//" + window.location.host + "/ws/tickets/");
    socket.onopen = function () { pause = 1000; body.dataset.pushConnected = "1"; };
    socket.onmessage = function () { htmx.trigger(body, "tickets-changed"); };
    socket.onclose = function (event) {
      delete body.dataset.pushConnected;
      if (event.code === 4403) { return; }  // not allowed: polling would not help either
      setTimeout(connect, pause);
      pause = Math.min(pause * 2, 30000);
    };
  }
  connect();
})();
