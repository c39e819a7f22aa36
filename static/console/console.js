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

// Live pages with a shared channel layer (REDIS_URL): the server pushes "something
// changed" over the WebSocket named by <body data-push>, and the page's live region
// (hx-trigger="live-changed from:body") fetches itself again. Reconnects with growing
// pauses if the socket drops, and fetches again then: a change pushed while it was down
// was never heard.
//
// A busy run pushes several changes a second, and every page open on it would fetch its
// region back to back. So a page fetches at most once per REFRESH_GAP_MS: the first change
// at once, the changes after it folded into one fetch at the end of the gap — always
// after the last change, so the page never stays behind. (htmx's `throttle:` drops the
// changes inside the gap instead, the last one too.)
(function () {
  "use strict";
  const body = document.body;
  if (!body || !body.dataset.push) { return; }
  const REFRESH_GAP_MS = 1000;
  let pause = 1000;
  let dropped = false;
  let fetchedAt = 0;
  let due = null;  // the timer of the fetch that ends the gap
  function fetchNow() {
    due = null;
    fetchedAt = Date.now();
    htmx.trigger(body, "live-changed");
  }
  function changed() {
    if (due !== null) { return; }  // a fetch is due: it will show this change too
    const wait = fetchedAt + REFRESH_GAP_MS - Date.now();
    if (wait <= 0) { fetchNow(); } else { due = setTimeout(fetchNow, wait); }
  }
  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(scheme + "//" + window.location.host + body.dataset.push);
    socket.onopen = function () {
      pause = 1000;
      body.dataset.pushConnected = "1";
      if (dropped) { changed(); }
    };
    socket.onmessage = changed;
    socket.onclose = function (event) {
      delete body.dataset.pushConnected;
      dropped = true;
      if (event.code === 4403) { return; }  // not allowed: polling would not help either
      setTimeout(connect, pause);
      pause = Math.min(pause * 2, 30000);
    };
  }
  connect();
})();

// Keyboard shortcuts on the reviewer queue: j / k move a highlighted row down / up, Enter
// opens it. Keys typed into a field belong to the field. (An approval's page has keys of
// its own, none of which decides: static/approvals/decide.js.)
(function () {
  "use strict";
  let selectedId = null;  // the highlighted row, kept across the table's live refreshes

  function typing(target) {
    if (!target || !target.tagName) { return false; }
    const tag = target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
  }
  function rows() {
    return Array.from(document.querySelectorAll("[data-shortcuts=queue] tr.approval-row"));
  }
  function mark(row) {
    row.classList.add("selected");
    row.setAttribute("aria-selected", "true");
  }
  function highlight(row) {
    rows().forEach(function (r) {
      r.classList.remove("selected");
      r.removeAttribute("aria-selected");
    });
    selectedId = row.id;
    mark(row);
    row.scrollIntoView({ block: "nearest" });
  }
  function move(step) {
    const all = rows();
    if (!all.length) { return; }
    let index = all.findIndex(function (r) { return r.id === selectedId; });
    if (index < 0) {
      index = step > 0 ? 0 : all.length - 1;
    } else {
      index = Math.min(all.length - 1, Math.max(0, index + step));
    }
    highlight(all[index]);
  }
  // After settling: htmx settles a swapped row by putting back its new attributes, which
  // would drop a class set any earlier.
  document.addEventListener("htmx:afterSettle", function () {
    const row = selectedId && document.getElementById(selectedId);
    if (row) { mark(row); }
  });

  function onQueue(event) {
    if (event.key === "j" || event.key === "k") {
      move(event.key === "j" ? 1 : -1);
      event.preventDefault();
    } else if (event.key === "Enter" && !event.target.closest("a, button")) {
      const row = selectedId && document.getElementById(selectedId);
      if (row) {
        event.preventDefault();
        window.location.assign(row.dataset.href);
      }
    }
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    if (document.querySelector("[data-shortcuts=queue]")) { onQueue(event); }
  });
})();

// Bars on a time axis (the run's waterfall) carry their place as data-left / data-width,
// in percent, and are placed here through the CSSOM: a style="" attribute would need
// 'unsafe-inline' in the page's Content-Security-Policy. Again after every htmx swap.
(function () {
  "use strict";
  function percent(value) {
    const number = parseFloat(value);
    return Number.isFinite(number) ? number + "%" : null;
  }
  function place(root) {
    const found = Array.from(root.querySelectorAll("[data-left], [data-width]"));
    if (root.matches && root.matches("[data-left], [data-width]")) { found.push(root); }
    found.forEach(function (element) {
      const left = percent(element.dataset.left);
      const width = percent(element.dataset.width);
      if (left !== null) { element.style.left = left; }
      if (width !== null) { element.style.width = width; }
    });
  }
  if (window.htmx) {
    htmx.onLoad(place);  // the page itself, then each swapped-in fragment
  } else {
    document.addEventListener("DOMContentLoaded", function () { place(document); });
  }
})();

// Narrow screens (console.css, under 760 px): the header folds its navigation, search and
// account behind the Menu button. Only this script folds it (.foldable), so without
// JavaScript the header stacks open and nothing is out of reach. Esc closes it again.
(function () {
  "use strict";
  const header = document.querySelector("header.topbar");
  const button = header && header.querySelector(".menu-toggle");
  if (!button) { return; }
  header.classList.add("foldable");
  function show(open) {
    header.classList.toggle("open", open);
    button.setAttribute("aria-expanded", open ? "true" : "false");
  }
  button.addEventListener("click", function () {
    show(button.getAttribute("aria-expanded") !== "true");
  });
  header.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && header.classList.contains("open")) {
      show(false);
      button.focus();
    }
  });
})();

// Under 600 px the queues read as stacked cards (console.css), each cell labelled with its
// column's heading: copied here from the table's head into data-label, so a template
// need not repeat it (a cell's own data-label wins; a cell spanning columns gets none).
// Again for each fragment htmx swaps in: the live tables refresh themselves.
(function () {
  "use strict";
  function label(table) {
    const head = table.tHead && table.tHead.rows[table.tHead.rows.length - 1];
    if (!head) { return; }
    const names = [];
    Array.from(head.cells).forEach(function (cell) {
      for (let i = 0; i < cell.colSpan; i++) { names.push(cell.textContent.trim()); }
    });
    Array.from(table.tBodies).forEach(function (body) {
      Array.from(body.rows).forEach(function (row) {
        let column = 0;
        Array.from(row.cells).forEach(function (cell) {
          if (cell.colSpan === 1 && names[column] && !cell.hasAttribute("data-label")) {
            cell.dataset.label = names[column];
          }
          column += cell.colSpan;
        });
      });
    });
  }
  function labelAll(root) {
    const tables = Array.from(root.querySelectorAll("table"));
    if (root.matches && root.matches("table")) { tables.push(root); }
    tables.forEach(label);
  }
  if (window.htmx) {
    htmx.onLoad(labelAll);
  } else {
    document.addEventListener("DOMContentLoaded", function () { labelAll(document); });
  }
})();
// Times: the server writes <time data-local datetime="…" title="… UTC"> in UTC
// (toolops/templatetags/when.py); here the text becomes the viewer's local time, and the
// title keeps the UTC time on hover. Again after every htmx swap.
(function () {
  "use strict";
  function two(n) { return (n < 10 ? "0" : "") + n; }
  function local(date, precision) {
    const day = date.getFullYear() + "-" + two(date.getMonth() + 1) + "-" + two(date.getDate());
    const minutes = two(date.getHours()) + ":" + two(date.getMinutes());
    const seconds = minutes + ":" + two(date.getSeconds());
    if (precision === "time") { return seconds; }
    return day + " " + (precision === "seconds" ? seconds : minutes);
  }
  function localize(root) {
    const found = Array.from(root.querySelectorAll("time[data-local]"));
    if (root.matches && root.matches("time[data-local]")) { found.push(root); }
    found.forEach(function (element) {
      const date = new Date(element.getAttribute("datetime"));
      if (!Number.isNaN(date.getTime())) {
        element.textContent = local(date, element.dataset.local);
      }
    });
  }
  if (window.htmx) {
    htmx.onLoad(localize);
  } else {
    document.addEventListener("DOMContentLoaded", function () { localize(document); });
  }
})();

// Actions that cannot be taken back (abort a run, force a breaker open) ask once more.
// The form also requires its "I understand" box, so the page is safe without JavaScript.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    const form = event.target;
    const submitter = event.submitter;
    const question = (submitter && submitter.dataset.confirm) || form.dataset.confirm;
    if (question && !window.confirm(question)) { event.preventDefault(); }
  });
})();

// The menu's counts (Unknown outcomes, Approvals, Tickets) follow on every page without a
// reload: every 15 s the menu asks its data-counts URL, whose answer htmx swaps in, each
// count in place of its namesake (out-of-band swaps: templates/console/_nav_counts.html).
// Not while the tab is hidden; shown again after a while, it asks at once.
(function () {
  "use strict";
  const nav = document.querySelector("nav[data-counts]");
  if (!nav || !window.htmx) { return; }
  const EVERY_MS = 15000;
  let askedAt = Date.now();
  function ask() {
    if (document.hidden) { return; }
    askedAt = Date.now();
    htmx.ajax("GET", nav.dataset.counts, { source: nav, swap: "none" });
  }
  setInterval(ask, EVERY_MS);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && Date.now() - askedAt >= EVERY_MS) { ask(); }
  });
})();
